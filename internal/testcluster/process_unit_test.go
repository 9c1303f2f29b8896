// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

package testcluster

import (
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestCPUTime: the processor time of a process the cluster holds grows by what it spent on the
// processor meanwhile (this test process stands in for a component, and getrusage says what it
// spent), and a process that is gone counts nothing. It spins until the process has had 200 ms
// of processor time, however busy the machine: a fixed spin of wall time got less than half of
// a processor while the suite's background builds ran.
func TestCPUTime(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	self := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c := &Cluster{procs: []*process{{Name: "self", PID: os.Getpid()}, {Name: "gone", PID: 1 << 30}}}
	before, selfBefore := c.CPUTime(), self()
	var sink int
	for deadline := time.Now().Add(time.Minute); self()-selfBefore < 200*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatal("the test process got under 200 ms of processor time in a minute")
		}
		for range 1 << 20 {
			sink++
		}
	}
	_ = sink
	spent := self() - selfBefore
	// /proc counts in clock ticks (10 ms), read twice.
	if got := c.CPUTime() - before; got < spent-20*time.Millisecond || got > spent+200*time.Millisecond {
		t.Fatalf("CPUTime grew by %s while the process spent %s on the processor", got, spent)
	}
}

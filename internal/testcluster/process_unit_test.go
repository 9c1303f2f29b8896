package testcluster

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// TestCPUTime: the processor time of a process the cluster holds grows by at least what it spent
// on the processor meanwhile (this test process stands in for a component), and a process that
// is gone counts nothing.
func TestCPUTime(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	c := &Cluster{procs: []*process{{Name: "self", PID: os.Getpid()}, {Name: "gone", PID: 1 << 30}}}
	before := c.CPUTime()
	var sink int
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		sink++
	}
	_ = sink
	// At least most of the 300 ms of spinning (tick granularity is 10 ms; the scheduler may
	// have taken some of it away).
	if got := c.CPUTime() - before; got < 150*time.Millisecond {
		t.Fatalf("CPUTime grew by %s over 300 ms of spinning, want at least 150 ms", got)
	}
}

// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

//go:build linux

package recreation

import (
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestProcessGone: a lease holder is taken for gone only when it ran under this kernel and PID
// namespace and has ended (exited, or killed and not yet reaped), or its PID is another
// process's now; a live process, this one, or one of another machine or container (another
// boot ID or PID namespace) is not.
func TestProcessGone(t *testing.T) {
	me := processID()
	if me == "" {
		t.Fatal("processID is empty on Linux")
	}
	parts := strings.Split(me, "/")
	id := func(pid int) string {
		_, start, err := procState(pid)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join([]string{parts[0], parts[1], strconv.Itoa(pid), start}, "/")
	}
	running := exec.Command("sleep", "60")
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = running.Process.Kill(); _ = running.Wait() }()
	runningID := id(running.Process.Pid)
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	zombieID := id(zombie.Process.Pid)
	for state, _, _ := procState(zombie.Process.Pid); state != "Z"; state, _, _ = procState(zombie.Process.Pid) {
		runtime.Gosched() // not reaped (no Wait yet): a zombie once it has exited
	}
	other := func(i int, v string) string {
		p := strings.Split(runningID, "/")
		p[i] = v
		return strings.Join(p, "/")
	}
	for _, c := range []struct {
		name string
		id   string
		gone bool
	}{
		{"running", runningID, false},
		{"a zombie", zombieID, true},
		{"this process", me, false},
		{"another machine", other(0, "00000000-0000-0000-0000-000000000000"), false},
		{"another container", other(1, "pid:[1]"), false},
		{"its PID taken by another process", other(3, "1"), true},
		{"no such PID", other(2, "999999999"), true},
		{"empty", "", false},
		{"malformed", parts[0] + "/" + parts[1] + "/x/1", false},
	} {
		if got := processGone(c.id); got != c.gone {
			t.Errorf("%s: processGone(%q) = %t, want %t", c.name, c.id, got, c.gone)
		}
	}
	_ = zombie.Wait()
	if !processGone(zombieID) {
		t.Errorf("reaped: processGone(%q) = false", zombieID)
	}
}

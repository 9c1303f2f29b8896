//go:build linux

package k8sops

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestProcessGone: a lease holder is taken for gone only when it ran under this kernel and PID
// namespace and has ended; a live process, this one, or one of another machine or container
// (another boot ID or PID namespace) is not.
func TestProcessGone(t *testing.T) {
	me := processID()
	if me == "" {
		t.Fatal("processID is empty on Linux")
	}
	prefix := me[:strings.LastIndexByte(me, '/')+1]
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	running := exec.Command("sleep", "60")
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = running.Process.Kill(); _ = running.Wait() }()
	endedID := prefix + strconv.Itoa(ended.Process.Pid)
	for _, c := range []struct {
		id   string
		gone bool
	}{
		{endedID, true},
		{prefix + strconv.Itoa(running.Process.Pid), false},
		{me, false},
		{"00000000-0000-0000-0000-000000000000" + endedID[strings.IndexByte(endedID, '/'):], false}, // another machine
		{strings.Replace(endedID, "pid:[", "pid:[9", 1), false},                                    // another container
		{"", false},
		{prefix + "x", false},
	} {
		if got := processGone(c.id); got != c.gone {
			t.Errorf("processGone(%q) = %t, want %t", c.id, got, c.gone)
		}
	}
}

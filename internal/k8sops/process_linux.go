//go:build linux

package k8sops

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processID names this process so that another process can tell whether it still runs: the
// kernel's boot ID and PID namespace (the same on both sides means kill(2) sees the same
// processes, whatever the hostnames say: two containers may share a hostname and not their
// PIDs) and the PID. "" when either cannot be read.
func processID() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(boot)) + "/" + ns + "/" + strconv.Itoa(os.Getpid())
}

// processGone reports whether id (of processID) names a process of this kernel and PID
// namespace that no longer runs. A process elsewhere is never taken for gone.
func processGone(id string) bool {
	mine := processID()
	i, j := strings.LastIndexByte(id, '/'), strings.LastIndexByte(mine, '/')
	if mine == "" || i < 0 || id[:i] != mine[:j] || id == mine {
		return false
	}
	pid, err := strconv.Atoi(id[i+1:])
	return err == nil && pid > 0 && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

//go:build linux

package recreation

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processID names this process so that another process can tell whether it still runs: the
// kernel's boot ID and PID namespace (the same on both sides means both see the same processes,
// whatever the hostnames say: two containers may share a hostname and not their PIDs), the PID
// and its start time (a PID used again by a later process is not this one). "" when any cannot
// be read.
func processID() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	pid := os.Getpid()
	_, start, err := procState(pid)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s/%s/%d/%s", strings.TrimSpace(string(boot)), ns, pid, start)
}

// processGone reports whether id (of processID) names a process of this kernel and PID
// namespace that has ended: none runs with its PID, the one there is a zombie (killed, and not
// yet reaped: a container's init may never reap it), or another process took the PID. A
// process elsewhere is never taken for gone.
func processGone(id string) bool {
	mine := processID()
	parts, own := strings.Split(id, "/"), strings.Split(mine, "/")
	if mine == "" || len(parts) != 4 || len(own) != 4 || parts[0] != own[0] || parts[1] != own[1] || id == mine {
		return false
	}
	pid, err := strconv.Atoi(parts[2])
	if err != nil || pid <= 0 {
		return false
	}
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	state, start, err := procState(pid)
	return err == nil && (state == "Z" || state == "X" || start != parts[3])
}

// procState reads a process's state and start time (in clock ticks since boot) from
// /proc/<pid>/stat; the fields after the command, which may hold any character, are read from
// after its closing parenthesis.
func procState(pid int) (state, start string, err error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", "", err
	}
	i := strings.LastIndexByte(string(raw), ')')
	fields := strings.Fields(string(raw[i+1:]))
	if i < 0 || len(fields) < 20 {
		return "", "", fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return fields[0], fields[19], nil // stat(5): state is field 3, starttime field 22
}

// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Starting and ending the control plane's processes, and only those.
package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// process is one control-plane component this package started.
type process struct {
	Name string `json:"name"`
	Bin  string `json:"bin"`
	PID  int    `json:"pid"`
	Log  string `json:"log"`

	args []string
	env  []string // added to this process's environment
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited (attached mode only)
}

// spawner starts every attached child from one goroutine locked to its OS thread, which lives
// as long as the package does: Pdeathsig fires when the *thread* that forked the child exits,
// so children must not be forked from threads the Go runtime may retire.
var spawner = sync.OnceValue(func() chan func() {
	ch := make(chan func())
	go func() {
		runtime.LockOSThread()
		for f := range ch {
			f()
		}
	}()
	return ch
})

// startProcess runs bin with args and env (added to this process's environment), output to
// logDir/name.log. Attached children get SIGKILL when the test process dies, so a killed
// `go test` leaves nothing behind; detached children (cluster-up) run in their own session and
// outlive the caller.
func startProcess(name, bin string, args, env []string, logDir string, detached bool) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	errc := make(chan error, 1)
	spawner() <- func() { errc <- cmd.Start() }
	if err := <-errc; err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &process{Name: name, Bin: bin, PID: cmd.Process.Pid, Log: logPath, args: args, env: env, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether an attached process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process: SIGTERM, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// stopByPID ends a detached process recorded in a state file. It signals the PID only while it
// still runs the recorded binary, so a reused PID is never touched.
func stopByPID(p process, grace time.Duration) error {
	running := func() bool {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID))
		if err != nil {
			return false
		}
		want, err := filepath.EvalSymlinks(p.Bin)
		return err == nil && strings.TrimSuffix(exe, " (deleted)") == want && !isZombie(p.PID)
	}
	if !running() {
		return nil
	}
	if err := syscall.Kill(p.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stopping %s (pid %d): %w", p.Name, p.PID, err)
	}
	gone := func(context.Context) (bool, error) { return !running(), nil }
	if wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, grace, true, gone) != nil {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	return nil
}

func isZombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z'
}

// logTail returns the last lines of a process's log, for error messages.
func logTail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// CPUTime is the processor time (user and system) the cluster's running processes have used
// since they started, read from /proc (Linux; zero elsewhere or for a process it cannot read).
// Two readings around a run give what the run cost the control plane, which on a small machine
// is often what bounds it.
func (c *Cluster) CPUTime() time.Duration {
	var total time.Duration
	for _, p := range c.procs {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses and may hold spaces: state is
		// field 3, utime and stime are fields 14 and 15, in USER_HZ ticks (100 a second on Linux).
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		var utime, stime int64
		if _, err := fmt.Sscan(f[11]+" "+f[12], &utime, &stime); err == nil {
			total += time.Duration(utime+stime) * time.Second / 100
		}
	}
	return total
}

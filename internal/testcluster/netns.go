// Copyright (c) The terraform-provider-k8scidr authors
// SPDX-License-Identifier: MPL-2.0

// Network isolation for the wire: a process re-run in a network namespace of its own, with no
// link of any kind to the host's, in which kube-proxy's rules and the pods' addresses live.
package testcluster

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// isolatedEnv marks a process that IsolatedCommand started.
const isolatedEnv = "K8SCIDR_ISOLATED_NETNS"

// IsolatedCommand is a command that runs name with args in a new network namespace of its own
// (root only). The process starts with nothing but a loopback interface that is down; Isolated
// brings it up. Nothing links that namespace to the caller's: whatever the process sends to a
// Service or pod IP stays in it, and it ends with the process.
func IsolatedCommand(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), isolatedEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Reexec runs this program again, with its arguments, standard streams and the thread this
// call locks, in a network namespace of its own (IsolatedCommand), and exits with its exit
// code; it returns true in that run (its loopback up). Only root can make the namespace:
// elsewhere it returns false at once, and the program runs without the wire.
func Reexec() (bool, error) {
	if ok, err := Isolated(); ok || err != nil {
		return ok, err
	}
	if os.Geteuid() != 0 {
		return false, nil
	}
	// Pdeathsig follows the thread that forks the child: this one, for the whole run.
	runtime.LockOSThread()
	cmd := IsolatedCommand(os.Args[0], os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		os.Exit(exit.ExitCode())
	}
	if err != nil {
		return false, fmt.Errorf("running in a network namespace of its own: %w", err)
	}
	os.Exit(0)
	return false, nil
}

// Isolated says whether this process runs in the namespace IsolatedCommand made, and if so
// brings its loopback up (once). It checks what it is told: a namespace holding any interface
// but loopback and the wire's own is not one this package made, and Isolated refuses it.
func Isolated() (bool, error) {
	if os.Getenv(isolatedEnv) == "" {
		return false, nil
	}
	return true, loopbackUp()
}

var loopbackUp = sync.OnceValue(func() error {
	ifaces, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, i := range ifaces {
		if i.Name != "lo" && !slices.Contains([]string{wireNodeLink, wirePodLink}, i.Name) {
			return fmt.Errorf("%s is set, but this network namespace has interface %s: it is not one IsolatedCommand made", isolatedEnv, i.Name)
		}
	}
	return ipCommand("link", "set", "lo", "up")
})

// ipCommand runs iproute2's ip with args.
func ipCommand(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("ip %v: %s", args, out)
		}
		return fmt.Errorf("ip %v: %w (install iproute2)", args, err)
	}
	return nil
}

// TB is what RerunIsolated needs of a test.
type TB interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// RerunIsolated runs the calling test again, alone, in a network namespace of its own
// (IsolatedCommand), with its output logged, and fails it if that run failed. It returns true
// in the outer run, which has nothing left to do, and false inside the namespace, where the
// test goes on.
func RerunIsolated(t TB) bool {
	t.Helper()
	if ok, err := Isolated(); err != nil {
		t.Fatalf("%v", err)
	} else if ok {
		return false
	}
	if os.Geteuid() != 0 {
		t.Skipf("the wire needs a network namespace of its own, which only root can make")
	}
	// -test.run matches each level of a subtest's name on its own.
	var run []string
	for _, level := range strings.Split(t.Name(), "/") {
		run = append(run, "^"+regexp.QuoteMeta(level)+"$")
	}
	cmd := IsolatedCommand(os.Args[0], "-test.run="+strings.Join(run, "/"), "-test.v", "-test.count=1", "-test.timeout=30m")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Forked from the spawner's thread, as every child of this package: Pdeathsig follows it.
	errc := make(chan error, 1)
	spawner() <- func() { errc <- cmd.Start() }
	err := <-errc
	if err == nil {
		err = cmd.Wait()
	}
	t.Logf("in a network namespace of its own:\n%s", out.Bytes())
	if err != nil {
		t.Fatalf("the test failed in its network namespace: %v", err)
	}
	// A skip there is a skip here, not a pass.
	if bytes.Contains(out.Bytes(), []byte("--- SKIP: "+t.Name()+" ")) {
		t.Skipf("skipped in its network namespace (above)")
	}
	return true
}

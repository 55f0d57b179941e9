//go:build !cgo

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/netns"
)

// helperEnv makes the test binary, started as a pod's app, print what it is (TestHelperApp).
const helperEnv = "MESHLAB_APP_TEST_HELPER"

// TestHelperApp is the app TestAppIsThePodInit starts: it prints its pid, its argv and
// each of its threads' credentials and restrictions.
func TestHelperApp(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("the app of TestAppIsThePodInit")
	}
	fmt.Printf("pid %d\nargs %q\nenv %s\n", os.Getpid(), os.Args[1:], os.Getenv("POD_ENV"))
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	sort.Strings(tasks)
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, k := range []string{"Uid:", "Gid:", "Groups:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:", "NoNewPrivs:", "Seccomp:"} {
				if strings.HasPrefix(line, k) {
					fmt.Printf("%s %s\n", filepath.Base(filepath.Dir(task)), line)
				}
			}
		}
	}
}

// TestAppIsThePodInit (a cgo build cannot restrict every thread: its init forks the app
// as for any other binary): started InProcess, the app binary is its pod's init and its app in
// one process, PID 1 of the pod's PID namespace, with the app's argv and env, and every
// thread restricted as a forked app is (its uid, no capabilities, no_new_privs, seccomp).
func TestAppIsThePodInit(t *testing.T) {
	testutil.RequireRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("ml-appinit-%d", os.Getpid())
	if err := netns.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Delete(ns) })
	const uid = 1879113731
	cmd := exec.Command(self, "-test.run=^TestHelperApp$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	sb := netns.Sandbox{UID: uid, GID: uid, Hostname: "pod-i", Init: self, InProcess: true, Env: []string{"POD_ENV=from-sandbox"}}
	if err := netns.StartSandboxed(ns, cmd, sb); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the app: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the app did not exit\n%s", out.String())
	}
	got := out.String()
	for _, want := range []string{"pid 1\n", `args ["-test.run=^TestHelperApp$" "-test.v"]`, "env from-sandbox\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the app's output lacks %q:\n%s", want, got)
		}
	}
	u := fmt.Sprint(uid)
	wants := []string{
		"Uid:\t" + u + "\t" + u + "\t" + u + "\t" + u, "Gid:\t" + u + "\t" + u + "\t" + u + "\t" + u,
		"CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000",
		"NoNewPrivs:\t1", "Seccomp:\t2",
	}
	threads := map[string]int{}
	for _, line := range strings.Split(got, "\n") {
		tid, rest, ok := strings.Cut(line, " ")
		if !ok || !strings.Contains(rest, ":\t") && !strings.HasPrefix(rest, "Groups:") {
			continue
		}
		if strings.HasPrefix(rest, "Groups:") {
			if strings.TrimSpace(strings.TrimPrefix(rest, "Groups:")) != "" {
				t.Errorf("thread %s has supplementary groups: %s", tid, rest)
			}
			continue
		}
		for _, w := range wants {
			if rest == w {
				threads[tid]++
			}
		}
	}
	if len(threads) < 2 {
		t.Errorf("want several threads' status, got %d:\n%s", len(threads), got)
	}
	for tid, n := range threads {
		if n != len(wants) {
			t.Errorf("thread %s matches %d of %d restrictions:\n%s", tid, n, len(wants), got)
		}
	}
}

package main

import (
	"bufio"
	"net"
	"slices"
	"strings"
	"testing"
)

// nc as busybox's: what stdin holds is sent, its end closes the sending half, and what
// the server answers until it closes is printed (tcp-echo answers each line, then
// closes at the client's end).
func TestNetcatHalfCloses(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			_, _ = c.Write([]byte("one " + sc.Text() + "\n"))
		}
	}()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	var out strings.Builder
	if err := netcat([]string{"-w", "10", host, port}, strings.NewReader("Sun Nov 29\n"), &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "one Sun Nov 29\n" {
		t.Errorf("nc printed %q, want %q", out.String(), "one Sun Nov 29\n")
	}
	if err := netcat([]string{"-l", "9000"}, strings.NewReader(""), &out); err == nil || !strings.Contains(err.Error(), "-l is not supported") {
		t.Errorf("nc -l: %v, want refused by name", err)
	}
}

// In a curl/sleep pod, nc is meshlab's, run directly or from sh -c.
func TestBusyboxCommand(t *testing.T) {
	t.Parallel()
	if got := busyboxCommand("/bin/meshlab", []string{"nc", "10.96.0.11", "31400"}); !slices.Equal(got, []string{"/bin/meshlab", "nc", "10.96.0.11", "31400"}) {
		t.Errorf("nc: %q", got)
	}
	got := busyboxCommand("/bin/meshlab", []string{"sh", "-c", "(date; sleep 1) | nc 10.96.0.11 31400"})
	want := []string{"sh", "-c", "nc() { '/bin/meshlab' nc \"$@\"; }\n(date; sleep 1) | nc 10.96.0.11 31400"}
	if !slices.Equal(got, want) {
		t.Errorf("sh -c: %q, want %q", got, want)
	}
	if got := busyboxCommand("/bin/meshlab", []string{"curl", "-s", "httpbin:8000"}); !slices.Equal(got, []string{"curl", "-s", "httpbin:8000"}) {
		t.Errorf("curl: %q", got)
	}
}

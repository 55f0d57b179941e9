package demoapp

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHelloWorldAnswersWithItsVersion(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(newHelloWorld("v2", "helloworld-v2-abc"))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "Hello version: v2, instance: helloworld-v2-abc\n" {
		t.Errorf("GET /hello = %q", body)
	}
}

func TestTCPEchoEchoesEveryLineBehindItsPrefix(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- serveTCPEcho(ctx, []net.Listener{ln}, "one", slog.New(slog.DiscardHandler)) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for _, line := range []string{"Mon Nov 12 23:24:57 UTC 2018\n", "hello\n"} {
		if _, err := io.WriteString(c, line); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if err != nil || got != "one "+line {
			t.Errorf("echo of %q = %q, %v; want %q", line, got, err, "one "+line)
		}
	}
	cancel() // also closes the open connection
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serveTCPEcho = %v after its context ended", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serveTCPEcho did not stop with its context")
	}
	if _, err := r.ReadString('\n'); err == nil {
		t.Error("the connection stayed open after the server stopped")
	}
}

func TestTCPEchoArgs(t *testing.T) {
	t.Parallel()
	ports, prefix, err := tcpEchoArgs([]string{"9000,9001,9002", "two"})
	if err != nil || len(ports) != 3 || ports[2] != 9002 || prefix != "two" {
		t.Errorf("tcpEchoArgs = %v %q %v", ports, prefix, err)
	}
	if _, _, err := tcpEchoArgs([]string{"9000"}); err == nil || !strings.Contains(err.Error(), "two arguments") {
		t.Errorf("one argument: %v", err)
	}
}

package proxy

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/meshlab/meshlab/dataplane/proxy/xdsclient"
	"github.com/meshlab/meshlab/internal/testutil"
)

// eventually polls cond until it holds or 10 seconds pass.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startProxy runs a proxy on the bootstrap at path until the test ends.
func startProxy(tb testing.TB, path string, mutate func(*Options)) *Server {
	tb.Helper()
	return startProxyWith(tb, path, mutate, nil)
}

// startProxyWith is startProxy with a hook on the Server before it runs.
func startProxyWith(tb testing.TB, path string, mutate func(*Options), hook func(*Server)) *Server {
	tb.Helper()
	opts, err := ParseArgs([]string{"-c", path, "--drain-time-s", "1", "-l", "debug"})
	if err != nil {
		tb.Fatal(err)
	}
	if mutate != nil {
		mutate(&opts)
	}
	srv, err := New(opts, testutil.Logger(tb), nil)
	if err != nil {
		tb.Fatalf("new proxy: %v", err)
	}
	if hook != nil {
		hook(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("proxy run: %v", err)
		}
	})
	select {
	case <-srv.Started():
	case err := <-done:
		tb.Fatalf("proxy exited before starting: %v", err)
	}
	return srv
}

// get sends a GET and returns status and body.
func get(tb testing.TB, client *http.Client, url string, host string) (int, string, http.Header) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, string(body), resp.Header
}

func adminGet(tb testing.TB, srv *Server, path string) (int, string) {
	tb.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	code, body, _ := get(tb, c, "http://"+srv.AdminAddr().String()+path, "")
	return code, body
}

func adminPost(tb testing.TB, srv *Server, path string) (int, string) {
	tb.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Post("http://"+srv.AdminAddr().String()+path, "text/plain", strings.NewReader(""))
	if err != nil {
		tb.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

type protoMessage = interface {
	ProtoReflect() protoreflect.Message
}

// newUnstartedForApply returns a running server on a static bootstrap with a stub xDS
// client, so tests can call Apply directly.
func newUnstartedForApply(tb testing.TB) *Server {
	tb.Helper()
	srv := startProxy(tb, writeBootstrap(tb, tb.TempDir(), staticBootstrap(tb)), nil)
	srv.xds = xdsclient.New(xdsclient.Options{Logger: testutil.Logger(tb)})
	return srv
}

package lab

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

func TestParseListen(t *testing.T) {
	for in, ok := range map[string]bool{
		"127.0.0.1:15080": true, "127.0.0.1:0": true, "192.168.1.5:80": true, "[::1]:8080": true,
		"0.0.0.0:15080": false, "[::]:1": false, ":15080": false, "localhost:15080": false, "127.0.0.1": false, "": false,
	} {
		if _, err := ParseListen(in); (err == nil) != ok {
			t.Errorf("ParseListen(%q) = %v, want ok=%v", in, err, ok)
		}
	}
}

func TestTailLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "proxy.log")
	if got := tailLines(path, 5); len(got) != 0 {
		t.Errorf("missing file: %v", got)
	}
	if err := os.WriteFile(path, []byte("a\nb\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tailLines(path, 2), ","); got != "b,c" {
		t.Errorf("tail 2 = %q", got)
	}
	if got := strings.Join(tailLines(path, 10), ","); got != "a,b,c" {
		t.Errorf("tail 10 = %q", got)
	}
	if got := tailLines(path, 0); len(got) != 0 {
		t.Errorf("tail 0 = %v", got)
	}
}

func TestListenDashboardFallsBackOnlyForTheDefault(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	l := &Lab{log: testutil.Logger(t)}
	l.opts.Listen = taken.Addr().String()
	if ln, err := l.listenDashboard(); err == nil {
		ln.Close()
		t.Fatal("an explicit --listen address that is taken was replaced")
	}
	l.opts.ListenFallback = true
	ln, err := l.listenDashboard()
	if err != nil {
		t.Fatalf("fallback: %v", err)
	}
	defer ln.Close()
	if got := ln.Addr().String(); got == taken.Addr().String() || !strings.HasPrefix(got, "127.0.0.1:") {
		t.Errorf("fallback listens on %s; want another port of 127.0.0.1", got)
	}
	l.opts.Listen = "0.0.0.0:0"
	if _, err := l.listenDashboard(); err == nil {
		t.Error("a wildcard address was accepted")
	}
}

func TestServeDashboardRecordsURL(t *testing.T) {
	var out strings.Builder
	l := &Lab{log: testutil.Logger(t), out: &out, paths: Paths{Dir: t.TempDir()}, bus: NewBus(4)}
	l.opts.Listen = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(t.Context())
	if err := l.serveDashboard(ctx, http.NotFoundHandler()); err != nil {
		t.Fatal(err)
	}
	cancel()
	l.servers.Wait()
	if out.Len() != 0 {
		t.Errorf("loopback listen printed %q", out.String())
	}
	u, err := ReadDashboardURL(l.paths)
	if err != nil || u != l.DashboardURL() || !strings.Contains(u, "/?token=") {
		t.Errorf("recorded URL %q (%v), lab says %q", u, err, l.DashboardURL())
	}
	if fi, err := os.Stat(l.paths.DashboardURLFile()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("dashboard.url mode = %v (%v), want 0600: it holds the token", fi.Mode().Perm(), err)
	}
}

func TestExposureWarning(t *testing.T) {
	for addr, warn := range map[string]bool{"127.0.0.1:15080": false, "[::1]:80": false, "192.168.1.5:15080": true, "10.0.0.1:1": true} {
		if got := exposureWarning(addr); (got != "") != warn {
			t.Errorf("exposureWarning(%s) = %q, want warning=%v", addr, got, warn)
		}
	}
}

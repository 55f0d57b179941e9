package demoapp

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

func TestRun(t *testing.T) {
	t.Parallel()
	_, portStr, _ := net.SplitHostPort(freePort(t))
	port, _ := strconv.Atoi(portStr)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Pod: "p", Ports: []uint16{uint16(port)}, Address: netip.MustParseAddr("127.0.0.1")}, testutil.Logger(t))
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	url := "http://127.0.0.1:" + portStr + "/healthz"
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("app not serving %s after 5s: %v", url, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v after its context ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	done <- nil // for the cleanup
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	busy := uint16(ln.Addr().(*net.TCPAddr).Port)
	loop := netip.MustParseAddr("127.0.0.1")
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"invalid", Config{}, "check app config: at least one port is required"},
		{"port in use", Config{Ports: []uint16{busy}, Address: loop}, "listen: "},
	} {
		err := Run(t.Context(), tt.cfg, testutil.Logger(t))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s: Run = %v, want an error starting %q", tt.name, err, tt.want)
		}
	}
}

func TestSleepPersonaServesNothingUntilStopped(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Config{Persona: PersonaSleep}, slog.New(slog.DiscardHandler)) }()
	select {
	case err := <-done:
		t.Fatalf("the sleep persona returned before its context ended: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil once stopped", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the sleep persona did not stop with its context")
	}
}

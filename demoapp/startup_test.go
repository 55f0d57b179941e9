package demoapp

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// The startup calls are made once, in order, without retry, and every answer reports
// them: a refused connection (what an app sees when its sidecar is not listening yet)
// and a success.
func TestStartupCallsAreReported(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"pod":"up"}`))
	}))
	t.Cleanup(up.Close)
	refused := freePort(t) // nothing listens there any more
	_, portStr, _ := net.SplitHostPort(freePort(t))
	port, _ := strconv.Atoi(portStr)
	cfg := Config{Pod: "p", Ports: []uint16{uint16(port)}, Address: netip.MustParseAddr("127.0.0.1"),
		StartupCalls: []string{"http://" + refused + "/", up.URL + "/"}}
	if got := Args(cfg); !strings.Contains(strings.Join(got, " "), "--startup-call=http://"+refused+"/ --startup-call="+up.URL+"/") {
		t.Errorf("Args = %v, want both --startup-call flags in order", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, testutil.Logger(t)) }()
	t.Cleanup(func() { cancel(); <-done })

	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var got response
		resp, err := c.Get("http://127.0.0.1:" + portStr + "/x")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
		}
		if err == nil && len(got.Startup) == 2 {
			first, second := got.Startup[0], got.Startup[1]
			if first.Error == "" || !strings.Contains(first.Error, "connection refused") || first.Status != 0 {
				t.Errorf("first startup call = %+v, want connection refused", first)
			}
			if second.Error != "" || second.Status != http.StatusOK || !strings.Contains(string(second.Body), `"up"`) {
				t.Errorf("second startup call = %+v, want 200 from the upstream", second)
			}
			if first.At.IsZero() || second.At.Before(first.At) {
				t.Errorf("startup call times %v, %v are not in order", first.At, second.At)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer with both startup calls after 5s: %+v %v", got, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStartupCallsAreValidated(t *testing.T) {
	t.Parallel()
	c := Config{Ports: []uint16{1}, StartupCalls: []string{"ftp://x/"}}
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), "ftp://x/") {
		t.Errorf("validate = %v, want an error naming the URL", err)
	}
}

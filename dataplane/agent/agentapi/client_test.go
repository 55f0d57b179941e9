package agentapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// serveUnix serves h on a unix socket in a test directory and returns its path.
func serveUnix(t *testing.T, h http.Handler) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return path
}

// TestStatusCodesBothWays checks the one table from both sides: the code the agent
// answers a sentinel with, and the sentinel the client makes of that code.
func TestStatusCodesBothWays(t *testing.T) {
	t.Parallel()
	path := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var code int
		fmt.Sscan(r.URL.Query().Get("code"), &code)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error": "refused with %d"}`, code)
	}))
	c := NewClient(path)
	t.Cleanup(c.Close)
	for _, tc := range codes {
		code := StatusCode(fmt.Errorf("wrapped: %w", tc.err), http.StatusTeapot)
		if code != tc.code {
			t.Errorf("StatusCode(%v) = %d, want %d", tc.err, code, tc.code)
		}
		_, err := c.AdminBytes(context.Background(), fmt.Sprintf("x?code=%d", code))
		var e *Error
		if !errors.Is(err, tc.err) || !errors.As(err, &e) || e.Code != code || e.Message != fmt.Sprintf("refused with %d", code) || e.Path != "/admin/x" {
			t.Errorf("answer %d: %v (%+v), want %v", code, err, e, tc.err)
		}
	}
	if got := StatusCode(context.DeadlineExceeded, http.StatusTeapot); got != http.StatusGatewayTimeout {
		t.Errorf("an ended context answers %d, want 504", got)
	}
	if got := StatusCode(errors.New("other"), http.StatusTeapot); got != http.StatusTeapot {
		t.Errorf("another error answers %d, want the fallback", got)
	}
	_, err := c.AdminBytes(context.Background(), "x?code=418")
	var e *Error
	if !errors.As(err, &e) || e.Unwrap() != nil {
		t.Errorf("418: %v, want an *Error wrapping no sentinel", err)
	}
	for _, s := range codes {
		if errors.Is(err, s.err) {
			t.Errorf("418 matched %v", s.err)
		}
	}
}

// TestClientRequests checks what each method sends: method, path, body and query.
func TestClientRequests(t *testing.T) {
	t.Parallel()
	seen := make(chan string, 1)
	path := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body [256]byte
		n, _ := r.Body.Read(body[:])
		seen <- r.Method + " " + r.URL.RequestURI() + " " + string(body[:n])
		switch r.URL.Path {
		case PathAdmin + "stats":
			fmt.Fprint(w, "a.b: 3\nh: No recorded values\n")
		case PathRestart, PathProxyConfig:
			fmt.Fprint(w, `{"epoch": 2, "restarted": true}`)
		default:
			fmt.Fprint(w, `{}`)
		}
	}))
	c := NewClient(path)
	t.Cleanup(c.Close)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"restart", func() error {
			res, err := c.Restart(ctx)
			if err == nil && (res.Epoch != 2 || !res.Restarted) {
				err = fmt.Errorf("result %+v", res)
			}
			return err
		}, "POST /restart "},
		{"set proxy config", func() error {
			_, err := c.SetProxyConfig(ctx, ProxySettings{LogLevel: "debug", DrainDuration: Duration(1500 * time.Millisecond)})
			return err
		}, `PUT /proxy-config {"logLevel":"debug","concurrency":0,"drainDuration":"1.5s","parentShutdownDuration":"0s","proxyPath":""}`},
		{"pause", func() error { _, err := c.PauseRenewal(ctx, true); return err }, "POST /certs/pause "},
		{"resume", func() error { _, err := c.PauseRenewal(ctx, false); return err }, "POST /certs/resume "},
		{"stats", func() error {
			st, err := c.Stats(ctx, `^a\.b$`)
			if err == nil && (st.Values["a.b"] != 3 || len(st.Histograms) != 1) {
				err = fmt.Errorf("stats %+v", st)
			}
			return err
		}, "GET /admin/stats?filter=%5Ea%5C.b%24 "},
		{"admin", func() error { _, err := c.AdminBytes(ctx, "/config_dump?include_eds"); return err }, "GET /admin/config_dump?include_eds "},
	} {
		if err := tc.call(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if got := <-seen; got != tc.want+"\n" && got != tc.want {
			t.Errorf("%s sent %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{`"soon"`, `true`} {
		var d Duration
		if err := d.UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("%s decoded without error", bad)
		}
	}
	var d Duration
	if err := d.UnmarshalJSON([]byte(`3000000000`)); err != nil || time.Duration(d) != 3*time.Second {
		t.Errorf("nanoseconds: %v, %v", time.Duration(d), err)
	}
}

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// restarter is the part of the epoch manager agent.sock drives. Safe for concurrent use;
// Restart blocks until the new epoch is started (see epochManager.Restart).
type restarter interface {
	Restart(ctx context.Context, s *agentapi.ProxySettings) (agentapi.RestartResult, error)
}

var _ restarter = (*epochManager)(nil)

// sockHandler serves agent.sock: GET /status as JSON (with ?wait=ready it answers once
// the pod is ready or failed, or after ?timeout, default and at most maxReadyWait: the
// lab learns of readiness by this long poll, not by asking again and again; changes
// wakes the waiter); POST /restart (a new epoch with the
// same settings); GET and PUT /proxy-config (the proxy settings; a change starts a new
// epoch, an unchanged PUT is a no-op); and GET|POST /admin/<path>?<query> proxied to the
// proxy's admin API at 127.0.0.1:adminPort/<path>?<query>, so that the lab process,
// outside the pod's namespace, can read it.
func sockHandler(status func(context.Context) agentapi.Status, changes func() <-chan struct{}, rs restarter, adminPort uint16, log *slog.Logger) http.Handler {
	adminHost := "127.0.0.1:" + strconv.Itoa(int(adminPort))
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme = "http"
			r.Out.URL.Host = adminHost
			r.Out.URL.Path = strings.TrimPrefix(r.In.URL.Path, "/admin")
			r.Out.URL.RawPath = ""
			r.Out.Host = adminHost
		},
		Transport: &http.Transport{DisableKeepAlives: true},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Debug("proxy admin request", "path", r.URL.Path, "err", err)
			http.Error(w, "proxy admin not reachable: "+err.Error(), http.StatusBadGateway)
		},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		var st agentapi.Status
		switch wait := r.URL.Query().Get("wait"); wait {
		case "":
			st = status(r.Context())
		case "ready":
			d, err := readyWaitTimeout(r.URL.Query().Get("timeout"))
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()}, log)
				return
			}
			st = waitReady(r.Context(), status, changes, d)
		default:
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("GET /status: wait=%q: the only condition is \"ready\"", wait)}, log)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			log.Debug("write status", "err", err)
		}
	})
	mux.HandleFunc("POST /restart", func(w http.ResponseWriter, r *http.Request) {
		res, err := rs.Restart(r.Context(), nil)
		writeRestart(w, res, err, log)
	})
	mux.HandleFunc("GET /proxy-config", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, status(r.Context()).Settings, log)
	})
	mux.HandleFunc("PUT /proxy-config", func(w http.ResponseWriter, r *http.Request) {
		var s agentapi.ProxySettings
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "decode proxy settings: " + err.Error()}, log)
			return
		}
		res, err := rs.Restart(r.Context(), &s)
		writeRestart(w, res, err, log)
	})
	mux.Handle("GET /admin/", rp)
	mux.Handle("POST /admin/", rp)
	return mux
}

// maxReadyWait bounds GET /status?wait=ready; readyRecheck is how often a waiter looks
// again without a change of the epochs: a LIVE proxy becomes ready when it has accepted
// its first LDS and CDS, which its admin API shows but no state change announces (Envoy
// goes LIVE without them when the initial fetch times out).
const (
	maxReadyWait = 60 * time.Second
	readyRecheck = 100 * time.Millisecond
)

// readyWaitTimeout parses ?timeout of GET /status?wait=ready (a Go duration; empty is
// maxReadyWait).
func readyWaitTimeout(v string) (time.Duration, error) {
	if v == "" {
		return maxReadyWait, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > maxReadyWait {
		return 0, fmt.Errorf("GET /status: timeout=%q: want a duration in (0, %s]", v, maxReadyWait)
	}
	return d, nil
}

// waitReady returns the status once it says ready or failed, once d has passed, or once
// ctx ends (the caller went away), whichever comes first. It looks again at each change
// of the epochs and, while the serving epoch is LIVE but not ready, every readyRecheck.
func waitReady(ctx context.Context, status func(context.Context) agentapi.Status, changes func() <-chan struct{}, d time.Duration) agentapi.Status {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		ch := changes()
		st := status(ctx)
		if st.Ready || st.Failed {
			return st
		}
		var recheck <-chan time.Time
		if servingLive(st) {
			recheck = time.After(readyRecheck)
		}
		select {
		case <-ch:
		case <-recheck:
		case <-deadline.C:
			return st
		case <-ctx.Done():
			return st
		}
	}
}

// servingLive reports whether a running epoch of st is LIVE.
func servingLive(st agentapi.Status) bool {
	for _, e := range st.Epochs {
		if e.State == agentapi.EpochLive {
			return true
		}
	}
	return false
}

// writeRestart answers a restart request: the result, or the error's code
// (agentapi.StatusCode: 503 while the agent stops, 504 when the request ended, 400 for
// invalid settings).
func writeRestart(w http.ResponseWriter, res agentapi.RestartResult, err error, log *slog.Logger) {
	if err != nil {
		writeJSON(w, agentapi.StatusCode(err, http.StatusBadRequest), map[string]string{"error": err.Error()}, log)
		return
	}
	writeJSON(w, http.StatusOK, res, log)
}

func writeJSON(w http.ResponseWriter, code int, v any, log *slog.Logger) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		log.Debug("write response", "err", err)
	}
}

// listenUnix listens on path with mode 0600, replacing a stale socket left by a killed
// agent.
func listenUnix(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return ln, nil
}

// serveHTTP serves h on ln until ctx ends, then shuts the server down (waiting briefly
// for requests in flight).
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve http on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-done
	return nil
}

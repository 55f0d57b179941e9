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
)

// restarter is the part of the epoch manager agent.sock drives. Safe for concurrent use;
// Restart blocks until the new epoch is started (see epochManager.Restart).
type restarter interface {
	Restart(ctx context.Context, s *ProxySettings) (RestartResult, error)
}

var _ restarter = (*epochManager)(nil)

// sockHandler serves agent.sock: GET /status as JSON; POST /restart (a new epoch with the
// same settings); GET and PUT /proxy-config (the proxy settings; a change starts a new
// epoch, an unchanged PUT is a no-op); and GET|POST /admin/<path>?<query> proxied to the
// proxy's admin API at 127.0.0.1:adminPort/<path>?<query>, so that the lab process,
// outside the pod's namespace, can read it.
func sockHandler(status func(context.Context) Status, rs restarter, adminPort uint16, log *slog.Logger) http.Handler {
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
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(status(r.Context())); err != nil {
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
		var s ProxySettings
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

// writeRestart answers a restart request: the result, 400 for invalid settings, 503
// while the agent stops.
func writeRestart(w http.ResponseWriter, res RestartResult, err error, log *slog.Logger) {
	switch {
	case errors.Is(err, ErrStopping):
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()}, log)
	case err != nil && errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeJSON(w, http.StatusGatewayTimeout, map[string]string{"error": err.Error()}, log)
	case err != nil:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()}, log)
	default:
		writeJSON(w, http.StatusOK, res, log)
	}
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

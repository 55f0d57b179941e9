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

// sockHandler serves agent.sock: GET /status as JSON, and GET|POST /admin/<path>?<query>
// proxied to the proxy's admin API at 127.0.0.1:adminPort/<path>?<query>, so that the
// lab process, outside the pod's namespace, can read it.
func sockHandler(status func(context.Context) Status, adminPort uint16, log *slog.Logger) http.Handler {
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
	mux.Handle("GET /admin/", rp)
	mux.Handle("POST /admin/", rp)
	return mux
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

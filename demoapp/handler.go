package demoapp

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// response is the JSON answer to every request but /healthz.
type response struct {
	Service   string            `json:"service"`
	Pod       string            `json:"pod"`
	Namespace string            `json:"namespace"`
	Version   string            `json:"version"`
	IP        string            `json:"ip"`
	Method    string            `json:"method"`
	Path      string            `json:"path"`
	Headers   map[string]string `json:"headers"`
	Upstreams []upstreamResult  `json:"upstreams,omitempty"`
	// Startup is the outcome of the app's startup calls so far.
	Startup []startupResult `json:"startup,omitempty"`
	// Error says why the status is an error the app chose (an injected fault).
	Error string `json:"error,omitempty"`
}

// handler serves the demo app's HTTP API. It is safe for concurrent use.
type handler struct {
	cfg     Config
	log     *slog.Logger
	client  *http.Client
	faults  *faults
	startup *startupCalls
	mux     *http.ServeMux
	// access, when set, serves instead of mux: mux behind the persona's access log.
	access http.Handler
}

func newHandler(c Config, log *slog.Logger) *handler {
	timeout := c.UpstreamTimeout
	if timeout == 0 {
		timeout = DefaultUpstreamTimeout
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// An app in a mesh pod talks to its upstreams directly (the sidecar captures the
	// connection); an HTTP_PROXY inherited from the host must not reroute it.
	transport.Proxy = nil
	h := &handler{
		cfg:     c,
		log:     log,
		client:  &http.Client{Timeout: timeout, Transport: transport},
		faults:  newFaults(c),
		startup: &startupCalls{},
		mux:     http.NewServeMux(),
	}
	switch c.Persona {
	case PersonaHTTPBin:
		h.mux = newHTTPBin(nil)
		h.access = accessLog(os.Stdout, h.mux) // httpbin logs every request, as its image does
		return h
	case PersonaGoHTTPBin:
		h.mux = newGoHTTPBin(nil)
		h.access = accessLog(os.Stdout, h.mux)
		return h
	case PersonaHelloWorld:
		h.mux = newHelloWorld(c.Version, c.Pod)
		return h
	}
	// Bookinfo's services time their calls as the sample does: no client-wide timeout.
	if mux := newBookinfo(c.Persona, c.Pod, &http.Client{Transport: transport}, nil, sampleTimeouts); mux != nil {
		h.mux = mux
		return h
	}
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	h.mux.HandleFunc("GET /bytes/{n}", serveBytes)
	h.mux.HandleFunc("/", h.serveApp)
	return h
}

// maxBytes is the largest body /bytes/{n} answers with.
const maxBytes = 10 << 20

// bytesPattern is what /bytes/{n} repeats: printable, so a body shown in a terminal is
// readable, and the same for every request.
const bytesPattern = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n"

// bytesChunk is built on the first /bytes request: a table built at package init would be
// built (and kept) in every process of the binary, agents and proxies too.
var bytesChunk = sync.OnceValue(func() string { return strings.Repeat(bytesPattern, 512) }) // 32 KiB

// serveBytes answers GET /bytes/{n} with exactly n bytes (as httpbin's /bytes and
// fortio's ?size=): a fixed payload size for load tests and benchmarks.
func serveBytes(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("n")
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 || n > maxBytes {
		http.Error(w, fmt.Sprintf("bytes: %q is not a byte count between 0 and %d", raw, maxBytes), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(n))
	for n > 0 {
		chunk := bytesChunk()
		part := chunk[:min(n, len(chunk))]
		if _, err := io.WriteString(w, part); err != nil {
			return
		}
		n -= len(part)
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.access != nil {
		h.access.ServeHTTP(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// serveApp answers with the app's identity, after the configured latency; "/" also calls
// the upstreams. A ?status=N query sets the answer's status; an injected fault overrides
// everything with ErrorCode.
func (h *handler) serveApp(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Latency > 0 {
		t := time.NewTimer(h.cfg.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	resp := h.identity(r)
	status := http.StatusOK
	if code, inject := h.faults.draw(); inject {
		resp.Error = "fault injected"
		h.reply(w, r, code, resp)
		return
	}
	if q := r.URL.Query().Get("status"); q != "" {
		code, err := strconv.Atoi(q)
		if err != nil || code < 200 || code > 599 {
			resp.Error = "status " + strconv.Quote(q) + " is not an HTTP status between 200 and 599"
			h.reply(w, r, http.StatusBadRequest, resp)
			return
		}
		status = code
	}
	if r.URL.Path == "/" {
		resp.Upstreams = h.callUpstreams(r)
	}
	h.reply(w, r, status, resp)
}

// identity fills the parts of the response that describe the app and the request.
func (h *handler) identity(r *http.Request) *response {
	headers := make(map[string]string, len(r.Header)+1)
	for k, v := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	headers["host"] = r.Host
	return &response{
		Service:   h.cfg.Service,
		Pod:       h.cfg.Pod,
		Namespace: h.cfg.Namespace,
		Version:   h.cfg.Version,
		IP:        localIP(r),
		Method:    r.Method,
		Path:      r.URL.Path,
		Headers:   headers,
		Startup:   h.startup.snapshot(),
	}
}

func (h *handler) reply(w http.ResponseWriter, r *http.Request, status int, resp *response) {
	body, err := json.Marshal(resp)
	if err != nil { // cannot happen: every field marshals
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
	h.log.Debug("served", "method", r.Method, "path", r.URL.Path, "status", status, "from", r.RemoteAddr)
}

// localIP returns the address the request's connection arrived on: the pod IP for
// traffic from the mesh, 127.0.0.1 when the sidecar delivers it.
func localIP(r *http.Request) string {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return ""
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return ap.Addr().Unmap().String()
}

package demoapp

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The tracing addons' personas: Istio's samples/addons/extras/zipkin.yaml (openzipkin's
// zipkin-slim, in-memory storage) and samples/addons/jaeger.yaml (Jaeger with its Zipkin
// receiver) stand in as a span store that takes Zipkin v2 JSON on 9411, as the proxies'
// Zipkin tracer posts it, and answers the query APIs the tracing pages and dashboards
// read: Zipkin's /api/v2 (services, spans, traces, trace) and, for Jaeger, its query
// service's /jaeger/api (services, operations, traces, trace) on 16686. Spans live in
// memory, as the addons' stores do (zipkin's STORAGE_METHOD mem; Jaeger's badger on an
// emptyDir), and go with the pod. No UI: the pages' pictures are the real UIs'; the
// JSON is what those UIs read.
const (
	// PersonaZipkin is openzipkin/zipkin(-slim): Zipkin's collector and API on 9411.
	PersonaZipkin = "zipkin"
	// PersonaJaeger is jaegertracing/jaeger (all-in-one): the Zipkin receiver on 9411,
	// the query API under /jaeger on 16686 and the health check on 13133.
	PersonaJaeger = "jaeger"
)

// The addons' ports.
const (
	zipkinPort      = 9411
	jaegerQueryPort = 16686
	jaegerHealth    = 13133
	jaegerOTLPGRPC  = 4317
	jaegerOTLPHTTP  = 4318
)

// maxStoredSpans bounds the store: the oldest spans go first.
const maxStoredSpans = 100000

// zipkinSpan is a span as Zipkin's v2 JSON writes it.
type zipkinSpan struct {
	TraceID        string            `json:"traceId"`
	ParentID       string            `json:"parentId,omitempty"`
	ID             string            `json:"id"`
	Kind           string            `json:"kind,omitempty"`
	Name           string            `json:"name,omitempty"`
	Timestamp      int64             `json:"timestamp,omitempty"`
	Duration       int64             `json:"duration,omitempty"`
	Debug          bool              `json:"debug,omitempty"`
	Shared         bool              `json:"shared,omitempty"`
	LocalEndpoint  *zipkinEndpoint   `json:"localEndpoint,omitempty"`
	RemoteEndpoint *zipkinEndpoint   `json:"remoteEndpoint,omitempty"`
	Annotations    []json.RawMessage `json:"annotations,omitempty"`
	Tags           map[string]string `json:"tags,omitempty"`
}

type zipkinEndpoint struct {
	ServiceName string `json:"serviceName,omitempty"`
	IPv4        string `json:"ipv4,omitempty"`
	IPv6        string `json:"ipv6,omitempty"`
	Port        int    `json:"port,omitempty"`
}

// spanStore holds the spans received, by trace, in arrival order.
type spanStore struct {
	mu     sync.Mutex
	traces map[string][]zipkinSpan
	order  []string // trace ids, first seen first
	count  int
}

func newSpanStore() *spanStore { return &spanStore{traces: map[string][]zipkinSpan{}} }

// add stores spans as Zipkin's collector does: ids and names lower-cased, a 64-bit trace
// id left as sent.
func (s *spanStore) add(spans []zipkinSpan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range spans {
		sp.TraceID, sp.ID, sp.ParentID = strings.ToLower(sp.TraceID), strings.ToLower(sp.ID), strings.ToLower(sp.ParentID)
		sp.Name = strings.ToLower(sp.Name)
		if sp.LocalEndpoint != nil {
			ep := *sp.LocalEndpoint
			ep.ServiceName = strings.ToLower(ep.ServiceName)
			sp.LocalEndpoint = &ep
		}
		if _, ok := s.traces[sp.TraceID]; !ok {
			s.order = append(s.order, sp.TraceID)
		}
		s.traces[sp.TraceID] = append(s.traces[sp.TraceID], sp)
		s.count++
	}
	for s.count > maxStoredSpans && len(s.order) > 0 {
		s.count -= len(s.traces[s.order[0]])
		delete(s.traces, s.order[0])
		s.order = s.order[1:]
	}
}

// traceQuery is what a trace search asks: Zipkin's serviceName, spanName, endTs,
// lookback and limit (Jaeger's service, operation, end, lookback, limit).
type traceQuery struct {
	service, span string
	end           time.Time
	lookback      time.Duration
	limit         int
}

// find returns the traces with a span of q's service (and span name), that started
// within the lookback before end, newest first, at most limit.
func (s *spanStore) find(q traceQuery) [][]zipkinSpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	from := q.end.Add(-q.lookback).UnixMicro()
	var out [][]zipkinSpan
	for _, id := range s.order {
		spans := s.traces[id]
		match := false
		for _, sp := range spans {
			if (q.service == "" || sp.service() == q.service) && (q.span == "" || sp.Name == q.span) && sp.Timestamp >= from && sp.Timestamp <= q.end.UnixMicro() {
				match = true
				break
			}
		}
		if match {
			out = append(out, slices.Clone(spans))
		}
	}
	slices.SortStableFunc(out, func(a, b []zipkinSpan) int { return cmp.Compare(traceStart(b), traceStart(a)) })
	if q.limit > 0 && len(out) > q.limit {
		out = out[:q.limit]
	}
	return out
}

func (s *spanStore) trace(id string) []zipkinSpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.traces[strings.ToLower(id)])
}

// services returns the services that sent spans, sorted; names the span names of one.
func (s *spanStore) services() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, spans := range s.traces {
		for _, sp := range spans {
			if n := sp.service(); n != "" {
				seen[n] = true
			}
		}
	}
	return sortedSet(seen)
}

func (s *spanStore) names(service string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, spans := range s.traces {
		for _, sp := range spans {
			if sp.service() == service && sp.Name != "" {
				seen[sp.Name] = true
			}
		}
	}
	return sortedSet(seen)
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (sp zipkinSpan) service() string {
	if sp.LocalEndpoint == nil {
		return ""
	}
	return sp.LocalEndpoint.ServiceName
}

func traceStart(spans []zipkinSpan) int64 {
	var first int64
	for _, sp := range spans {
		if first == 0 || (sp.Timestamp != 0 && sp.Timestamp < first) {
			first = sp.Timestamp
		}
	}
	return first
}

// zipkinAPI serves Zipkin's collector and query API, at / and under /zipkin (the UI's
// base path, which the API answers at too).
func zipkinAPI(store *spanStore) http.Handler {
	mux := http.NewServeMux()
	for _, base := range []string{"", "/zipkin"} {
		mux.HandleFunc("POST "+base+"/api/v2/spans", func(w http.ResponseWriter, r *http.Request) {
			var spans []zipkinSpan
			body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
			if err == nil {
				err = json.Unmarshal(body, &spans)
			}
			if err != nil {
				http.Error(w, "Expected a JSON_V2 encoded list: "+err.Error(), http.StatusBadRequest)
				return
			}
			store.add(spans)
			w.WriteHeader(http.StatusAccepted)
		})
		mux.HandleFunc("GET "+base+"/api/v2/services", func(w http.ResponseWriter, _ *http.Request) {
			writeTraceJSON(w, store.services())
		})
		mux.HandleFunc("GET "+base+"/api/v2/spans", func(w http.ResponseWriter, r *http.Request) {
			svc := strings.ToLower(r.URL.Query().Get("serviceName"))
			if svc == "" {
				http.Error(w, "serviceName is required", http.StatusBadRequest)
				return
			}
			writeTraceJSON(w, store.names(svc))
		})
		mux.HandleFunc("GET "+base+"/api/v2/remoteServices", func(w http.ResponseWriter, _ *http.Request) {
			writeTraceJSON(w, []string{}) // the proxies' spans carry no remote endpoint
		})
		mux.HandleFunc("GET "+base+"/api/v2/traces", func(w http.ResponseWriter, r *http.Request) {
			q, err := zipkinQuery(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			out := store.find(q)
			if out == nil {
				out = [][]zipkinSpan{}
			}
			writeTraceJSON(w, out)
		})
		mux.HandleFunc("GET "+base+"/api/v2/trace/{id}", func(w http.ResponseWriter, r *http.Request) {
			spans := store.trace(r.PathValue("id"))
			if len(spans) == 0 {
				http.Error(w, "Cannot find trace "+r.PathValue("id"), http.StatusNotFound)
				return
			}
			writeTraceJSON(w, spans)
		})
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/zipkin/", http.StatusFound)
	})
	mux.HandleFunc("GET /zipkin/{$}", func(w http.ResponseWriter, _ *http.Request) {
		writeTraceIndex(w, store, "Zipkin", "/zipkin/api/v2/traces?serviceName=", "/zipkin/api/v2/trace/")
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeTraceJSON(w, map[string]any{"status": "UP", "zipkin": map[string]any{"status": "UP", "details": map[string]any{"InMemoryStorage{}": map[string]any{"status": "UP"}}}})
	})
	return mux
}

// zipkinQuery reads Zipkin's trace search parameters: endTs (ms, default now),
// lookback (ms, default 1 day, as Zipkin's QueryRequest), limit (default 10).
func zipkinQuery(r *http.Request) (traceQuery, error) {
	v := r.URL.Query()
	q := traceQuery{service: strings.ToLower(v.Get("serviceName")), span: strings.ToLower(v.Get("spanName")),
		end: time.Now(), lookback: 24 * time.Hour, limit: 10}
	if q.span == "all" {
		q.span = ""
	}
	for _, f := range []struct {
		name string
		set  func(int64)
	}{
		{"endTs", func(n int64) { q.end = time.UnixMilli(n) }},
		{"lookback", func(n int64) { q.lookback = time.Duration(n) * time.Millisecond }},
		{"limit", func(n int64) { q.limit = int(n) }},
	} {
		if s := v.Get(f.name); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 0 {
				return q, &queryError{f.name, s}
			}
			f.set(n)
		}
	}
	return q, nil
}

type queryError struct{ name, value string }

func (e *queryError) Error() string { return e.name + "=" + e.value + " is not a non-negative number" }

// writeTraceJSON writes v as the trace stores' APIs do: compact JSON.
func writeTraceJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// tracingAddonPorts are the ports a tracing persona listens on, whatever its container
// declares (the addons' containers declare none).
func tracingAddonPorts(persona string) []uint16 {
	if persona == PersonaJaeger {
		return []uint16{zipkinPort, jaegerQueryPort, jaegerHealth, jaegerOTLPGRPC, jaegerOTLPHTTP}
	}
	return []uint16{zipkinPort}
}

// serveTracingAddon serves the zipkin or jaeger persona on lns (tracingAddonPorts'
// listeners, in order) until ctx ends.
func serveTracingAddon(ctx context.Context, persona string, lns []net.Listener, log *slog.Logger) error {
	store := newSpanStore()
	handlers := []http.Handler{zipkinAPI(store)}
	if persona == PersonaJaeger {
		health := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeTraceJSON(w, map[string]any{"status": "StatusOK"})
		})
		handlers = append(handlers, jaegerAPI(store), health)
	}
	errc := make(chan error, len(lns))
	if persona == PersonaJaeger && len(lns) == 5 {
		// Jaeger's OTLP receiver, on 4317 (gRPC) and 4318 (HTTP): served by package
		// demoapp/otelcol, which brings gRPC (tracestore_otlp.go).
		otlp := lns[3:]
		lns = lns[:3]
		if done := startOTLPTraceReceiver(ctx, otlp, store, errc, log); done != nil {
			defer func() { <-done }()
		}
	}
	var servers []*http.Server
	for i, ln := range lns {
		srv := &http.Server{Handler: handlers[i], ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		servers = append(servers, srv)
		log.Info("listening", "addr", ln.Addr().String(), "persona", persona)
		go func() { errc <- srv.Serve(ln) }()
	}
	var failed error
	select {
	case <-ctx.Done():
	case failed = <-errc:
	}
	for _, srv := range servers {
		_ = srv.Close()
	}
	if failed == http.ErrServerClosed { //nolint:errorlint // Serve returns it as is
		failed = nil
	}
	return failed
}

// writeTraceIndex is the stand-in's page in place of the real UI: the services and
// their latest traces, each a link to the query API's JSON.
func writeTraceIndex(w http.ResponseWriter, store *spanStore, ui, tracesURL, traceURL string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	page := "<!doctype html><title>" + ui + " (meshlab)</title><h1>" + ui + " stand-in</h1>" +
		"<p>meshlab's span store: the real UI is not here; these are what its query API answers.</p>"
	for _, svc := range store.services() {
		page += "<h2><a href=\"" + tracesURL + html.EscapeString(svc) + "\">" + html.EscapeString(svc) + "</a></h2><ul>"
		for _, t := range store.find(traceQuery{service: svc, end: time.Now(), lookback: 24 * time.Hour, limit: 10}) {
			page += fmt.Sprintf("<li><a href=\"%s%s\">%s</a>: %d spans</li>", traceURL, t[0].TraceID, t[0].TraceID, len(t))
		}
		page += "</ul>"
	}
	_, _ = io.WriteString(w, page)
}

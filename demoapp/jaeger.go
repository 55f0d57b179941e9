package demoapp

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// jaegerBasePath is the query service's base_path in Istio's jaeger addon config.
const jaegerBasePath = "/jaeger"

// Jaeger's query API answers wrap their data: {"data": ..., "total", "limit", "offset",
// "errors"}.
type jaegerResponse struct {
	Data   any   `json:"data"`
	Total  int   `json:"total"`
	Limit  int   `json:"limit"`
	Offset int   `json:"offset"`
	Errors []any `json:"errors"`
}

type jaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []jaegerSpan             `json:"spans"`
	Processes map[string]jaegerProcess `json:"processes"`
	Warnings  []string                 `json:"warnings"`
}

type jaegerSpan struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []jaegerRef `json:"references"`
	StartTime     int64       `json:"startTime"`
	Duration      int64       `json:"duration"`
	Tags          []jaegerKV  `json:"tags"`
	Logs          []any       `json:"logs"`
	ProcessID     string      `json:"processID"`
	Warnings      []string    `json:"warnings"`
}

type jaegerRef struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type jaegerKV struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

type jaegerProcess struct {
	ServiceName string     `json:"serviceName"`
	Tags        []jaegerKV `json:"tags"`
}

// jaegerAPI serves Jaeger's query API under /jaeger, from the spans the Zipkin receiver
// took, converted as Jaeger's Zipkin translator does: a span's kind becomes its
// span.kind tag, its parent a CHILD_OF reference, its local endpoint its process.
func jaegerAPI(store *spanStore) http.Handler {
	mux := http.NewServeMux()
	api := jaegerBasePath + "/api"
	mux.HandleFunc("GET "+api+"/services", func(w http.ResponseWriter, _ *http.Request) {
		svcs := store.services()
		writeTraceJSON(w, jaegerResponse{Data: svcs, Total: len(svcs)})
	})
	operations := func(w http.ResponseWriter, svc string) {
		ops := store.names(strings.ToLower(svc))
		writeTraceJSON(w, jaegerResponse{Data: ops, Total: len(ops)})
	}
	mux.HandleFunc("GET "+api+"/services/{service}/operations", func(w http.ResponseWriter, r *http.Request) {
		operations(w, r.PathValue("service"))
	})
	mux.HandleFunc("GET "+api+"/operations", func(w http.ResponseWriter, r *http.Request) {
		operations(w, r.URL.Query().Get("service"))
	})
	mux.HandleFunc("GET "+api+"/traces", func(w http.ResponseWriter, r *http.Request) {
		q, err := jaegerQuery(r)
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			writeTraceJSON(w, jaegerResponse{Errors: []any{map[string]any{"code": 400, "msg": err.Error()}}})
			return
		}
		traces := []jaegerTrace{}
		for _, spans := range store.find(q) {
			traces = append(traces, toJaeger(spans))
		}
		writeTraceJSON(w, jaegerResponse{Data: traces, Total: len(traces)})
	})
	mux.HandleFunc("GET "+api+"/traces/{id}", func(w http.ResponseWriter, r *http.Request) {
		spans := store.trace(r.PathValue("id"))
		if len(spans) == 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			writeTraceJSON(w, jaegerResponse{Errors: []any{map[string]any{"code": 404, "msg": "trace not found"}}})
			return
		}
		writeTraceJSON(w, jaegerResponse{Data: []jaegerTrace{toJaeger(spans)}, Total: 1})
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, jaegerBasePath+"/", http.StatusFound)
	})
	mux.HandleFunc("GET "+jaegerBasePath+"/{$}", func(w http.ResponseWriter, _ *http.Request) {
		writeTraceIndex(w, store, "Jaeger", api+"/traces?service=", api+"/traces/")
	})
	return mux
}

// jaegerQuery reads Jaeger's trace search parameters: service (required), operation,
// end (µs, default now), lookback (a duration such as 1h, or "custom"; default 1h),
// limit (default 20).
func jaegerQuery(r *http.Request) (traceQuery, error) {
	v := r.URL.Query()
	q := traceQuery{service: strings.ToLower(v.Get("service")), span: strings.ToLower(v.Get("operation")),
		end: time.Now(), lookback: time.Hour, limit: 20}
	if q.service == "" {
		return q, fmt.Errorf("parameter 'service' is required")
	}
	if s := v.Get("end"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return q, fmt.Errorf("unable to parse param 'end': %w", err)
		}
		q.end = time.UnixMicro(n)
	}
	if s := v.Get("lookback"); s != "" && s != "custom" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return q, fmt.Errorf("unable to parse param 'lookback': %w", err)
		}
		q.lookback = d
	}
	if s := v.Get("start"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return q, fmt.Errorf("unable to parse param 'start': %w", err)
		}
		q.lookback = q.end.Sub(time.UnixMicro(n))
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return q, fmt.Errorf("unable to parse param 'limit': %q", s)
		}
		q.limit = n
	}
	return q, nil
}

// toJaeger converts one trace's Zipkin spans.
func toJaeger(spans []zipkinSpan) jaegerTrace {
	t := jaegerTrace{Processes: map[string]jaegerProcess{}}
	procs := map[string]string{} // service+ip -> process id
	for _, sp := range spans {
		t.TraceID = sp.TraceID
		svc, ip := sp.service(), ""
		if sp.LocalEndpoint != nil {
			ip = sp.LocalEndpoint.IPv4
		}
		pid, ok := procs[svc+"\x00"+ip]
		if !ok {
			pid = "p" + strconv.Itoa(len(procs)+1)
			procs[svc+"\x00"+ip] = pid
			var tags []jaegerKV
			if ip != "" {
				tags = append(tags, jaegerKV{Key: "ip", Type: "string", Value: ip})
			}
			t.Processes[pid] = jaegerProcess{ServiceName: svc, Tags: tags}
		}
		js := jaegerSpan{TraceID: sp.TraceID, SpanID: sp.ID, OperationName: sp.Name, StartTime: sp.Timestamp, Duration: sp.Duration,
			ProcessID: pid, Logs: []any{}, References: []jaegerRef{}}
		if sp.ParentID != "" {
			js.References = append(js.References, jaegerRef{RefType: "CHILD_OF", TraceID: sp.TraceID, SpanID: sp.ParentID})
		}
		if sp.Kind != "" {
			js.Tags = append(js.Tags, jaegerKV{Key: "span.kind", Type: "string", Value: strings.ToLower(sp.Kind)})
		}
		for _, k := range slices.Sorted(maps.Keys(sp.Tags)) {
			js.Tags = append(js.Tags, jaegerKV{Key: k, Type: "string", Value: sp.Tags[k]})
		}
		t.Spans = append(t.Spans, js)
	}
	return t
}

package tracing

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"time"
)

// B3 headers, as Envoy's Zipkin tracer reads and writes them.
const (
	HeaderTraceID      = "X-B3-Traceid"
	HeaderSpanID       = "X-B3-Spanid"
	HeaderParentSpanID = "X-B3-Parentspanid"
	HeaderSampled      = "X-B3-Sampled"
	HeaderFlags        = "X-B3-Flags"
)

// Span kinds, as Zipkin v2 names them: Envoy's ingress operation is a SERVER span, its
// egress operation and the router's upstream span a CLIENT span.
const (
	KindServer = "SERVER"
	KindClient = "CLIENT"
)

// Span is one span of a request at a proxy: what Envoy's ZipkinSpan or OpenTelemetry
// Span holds until it is finished.
type Span struct {
	TraceID, ID, ParentID string // hex; ParentID "" for a root span
	Kind                  string
	Name                  string
	Start                 time.Time
	Duration              time.Duration
	// Shared is set on a server span that took the client's span id
	// (shared_span_context).
	Shared bool
	// Sampled says whether the span is reported; an unsampled span still propagates
	// its context, with x-b3-sampled: 0.
	Sampled bool
	Tags    map[string]string
	// TagOrder is the order tags were first set in: an OTLP span's attributes keep it,
	// as Envoy's OpenTelemetry span appends each new key.
	TagOrder []string
	// W3C says the span's context travels as W3C trace context (traceparent and
	// tracestate: Envoy's OpenTelemetry tracer) instead of B3 (Zipkin's).
	W3C bool
	// TraceState is the tracestate the span carries on (the parent's, W3C only).
	TraceState string
}

// Start begins the span of one request at a proxy, as ZipkinDriver::startSpan: the
// request's B3 context, when it has one (x-b3-traceid and x-b3-spanid), makes the
// span its child, or for a server span under shared_span_context its continuation;
// otherwise it is the root of a new trace. x-b3-sampled (or the debug flag) decides
// whether it is sampled when present, else traced, the HCM's decision.
func (z *Zipkin) Start(h http.Header, kind, name string, traced bool, now time.Time) *Span {
	s := &Span{Kind: kind, Name: name, Start: now, Sampled: traced}
	if v := h.Get(HeaderSampled); v != "" {
		s.Sampled = v == "1" || strings.EqualFold(v, "true") || v == "d"
	}
	if h.Get(HeaderFlags) == "1" {
		s.Sampled = true
	}
	traceID, spanID := strings.ToLower(h.Get(HeaderTraceID)), strings.ToLower(h.Get(HeaderSpanID))
	if validID(traceID, true) && validID(spanID, false) {
		s.TraceID = traceID
		if z.SharedSpanContext && kind == KindServer {
			s.ID, s.ParentID, s.Shared = spanID, strings.ToLower(h.Get(HeaderParentSpanID)), true
		} else {
			s.ID, s.ParentID = newID(8), spanID
		}
		return s
	}
	s.ID = newID(8)
	s.TraceID = s.ID
	if z.TraceID128 {
		s.TraceID = newID(8) + s.ID
	}
	return s
}

// Child is a span of the same trace with s as parent: the router's upstream span
// (spawn_upstream_span).
func (s *Span) Child(kind, name string, now time.Time) *Span {
	return &Span{
		TraceID: s.TraceID, ID: newID(8), ParentID: s.ID, Kind: kind, Name: name, Start: now, Sampled: s.Sampled,
		W3C: s.W3C, TraceState: s.TraceState,
	}
}

// Inject writes s's context into h, the upstream request's headers, as
// ZipkinSpan::injectContext with B3 multi headers, or for a W3C span as the
// OpenTelemetry span's injectContext (w3c.go).
func (s *Span) Inject(h http.Header) {
	if s.W3C {
		s.injectW3C(h)
		return
	}
	h.Set(HeaderTraceID, s.TraceID)
	h.Set(HeaderSpanID, s.ID)
	if s.ParentID != "" {
		h.Set(HeaderParentSpanID, s.ParentID)
	} else {
		h.Del(HeaderParentSpanID)
	}
	if s.Sampled {
		h.Set(HeaderSampled, "1")
	} else {
		h.Set(HeaderSampled, "0")
	}
}

// SetTag sets a tag (a later value replaces an earlier one, as Envoy's setTag).
func (s *Span) SetTag(k, v string) {
	if s.Tags == nil {
		s.Tags = make(map[string]string, 24)
		s.TagOrder = make([]string, 0, 24)
	}
	if _, ok := s.Tags[k]; !ok {
		s.TagOrder = append(s.TagOrder, k)
	}
	s.Tags[k] = v
}

// Finish ends the span at now.
func (s *Span) Finish(now time.Time) {
	s.Duration = now.Sub(s.Start)
}

// validID reports whether id is a B3 id: 16 hex digits, or 32 for a trace id.
func validID(id string, trace bool) bool {
	if len(id) != 16 && (!trace || len(id) != 32) {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.Trim(id, "0") != ""
}

// newID is n random bytes in hex, never all zero.
func newID(n int) string {
	b := make([]byte, n)
	for {
		_, _ = rand.Read(b)
		for _, c := range b {
			if c != 0 {
				return hex.EncodeToString(b)
			}
		}
	}
}

package tracing

import (
	"encoding/hex"
	"net/http"
	"strings"
	"time"
)

// W3C trace context headers, as Envoy's OpenTelemetry tracer reads and writes them.
const (
	HeaderTraceparent = "Traceparent"
	HeaderTracestate  = "Tracestate"
)

// traceparentLen is a version 00 traceparent's length: 2+1+32+1+16+1+2.
const traceparentLen = 55

// parseTraceparent reads a traceparent header as Envoy's SpanContextExtractor does:
// exactly 55 characters, four dash-separated hex fields of 2, 32, 16 and 2 digits, a
// trace id and parent id not all zero; the sampled flag is bit 0 of the flags. Ids are
// returned in lower case.
func parseTraceparent(v string) (traceID, parentID string, sampled, ok bool) {
	if len(v) != traceparentLen {
		return "", "", false, false
	}
	parts := strings.Split(v, "-")
	if len(parts) != 4 || len(parts[0]) != 2 || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return "", "", false, false
	}
	for _, p := range parts {
		if _, err := hex.DecodeString(p); err != nil {
			return "", "", false, false
		}
	}
	traceID, parentID = strings.ToLower(parts[1]), strings.ToLower(parts[2])
	if strings.Trim(traceID, "0") == "" || strings.Trim(parentID, "0") == "" {
		return "", "", false, false
	}
	flags, _ := hex.DecodeString(parts[3])
	return traceID, parentID, flags[0]&1 == 1, true
}

// startW3C begins a span from the request's W3C context, as Envoy's OpenTelemetry
// Driver::startSpan: without a traceparent a new trace (128-bit id) sampled when
// traced; with a valid one a child of the caller's span that keeps its sampled flag and
// tracestate (every tracestate header, joined by commas); with an invalid one no span.
func startW3C(h http.Header, kind, name string, traced bool, now time.Time) *Span {
	s := &Span{Kind: kind, Name: name, Start: now, W3C: true}
	tp, present := h[HeaderTraceparent]
	if !present || len(tp) == 0 {
		s.Sampled, s.TraceID, s.ID = traced, newID(16), newID(8)
		return s
	}
	traceID, parentID, sampled, ok := parseTraceparent(tp[0])
	if !ok {
		return nil
	}
	s.TraceID, s.ParentID, s.ID, s.Sampled = traceID, parentID, newID(8), sampled
	s.TraceState = strings.Join(h.Values(HeaderTracestate), ",")
	return s
}

// injectW3C writes the span's context as the OpenTelemetry span's injectContext: a
// version 00 traceparent with the sampled flag, and the tracestate, set even when empty.
func (s *Span) injectW3C(h http.Header) {
	flags := "00"
	if s.Sampled {
		flags = "01"
	}
	h[HeaderTraceparent] = []string{"00-" + s.TraceID + "-" + s.ID + "-" + flags}
	h[HeaderTracestate] = []string{s.TraceState}
}

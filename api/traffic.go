package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Limits of the traffic tool.
const (
	// MaxTrafficRequests bounds TrafficRequest.N.
	MaxTrafficRequests = 1000
	// MaxTrafficHeaders bounds TrafficRequest.Headers.
	MaxTrafficHeaders = 32
	// MaxHeaderValues bounds the distinct values TrafficResult.Headers keeps per name.
	MaxHeaderValues = 8
	// MaxResponseHeaders bounds the header names TrafficResult.Headers keeps.
	MaxResponseHeaders = 64
)

// TrafficRequest asks the lab to send N HTTP requests (GET unless Method says otherwise)
// to URL from inside Pod's namespace, as the pod's app would (captured, so through its
// sidecar), with the given request headers.
type TrafficRequest struct {
	Pod     string            `json:"pod"`
	URL     string            `json:"url"`
	N       int               `json:"n"`
	Method  string            `json:"method,omitempty"`  // GET when empty
	Headers map[string]string `json:"headers,omitempty"` // request headers, e.g. end-user: jason
}

// trafficMethods are the methods the traffic tool sends (no body is sent).
var trafficMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions}

// Validate checks the request: a known-shape http URL and 1..MaxTrafficRequests.
func (r TrafficRequest) Validate() error {
	if r.Pod == "" {
		return errors.New("pod: required")
	}
	if r.N < 1 || r.N > MaxTrafficRequests {
		return fmt.Errorf("n: want 1..%d, got %d", MaxTrafficRequests, r.N)
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		return fmt.Errorf("url: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" || u.User != nil {
		return fmt.Errorf("url: want http://host[:port]/path, got %q", r.URL)
	}
	if r.Method != "" && !slices.Contains(trafficMethods, r.Method) {
		return fmt.Errorf("method: want one of %s, got %q", strings.Join(trafficMethods, ", "), r.Method)
	}
	if len(r.Headers) > MaxTrafficHeaders {
		return fmt.Errorf("headers: at most %d, got %d", MaxTrafficHeaders, len(r.Headers))
	}
	for name, value := range r.Headers {
		if !httpguts.ValidHeaderFieldName(name) {
			return fmt.Errorf("headers: invalid name %q", name)
		}
		if !httpguts.ValidHeaderFieldValue(value) {
			return fmt.Errorf("headers: invalid value for %q", name)
		}
		if strings.EqualFold(name, "host") || strings.EqualFold(name, "content-length") ||
			strings.EqualFold(name, "transfer-encoding") || strings.EqualFold(name, "connection") {
			return fmt.Errorf("headers: %q cannot be set", name)
		}
	}
	return nil
}

// TrafficResult summarises the answers.
type TrafficResult struct {
	Sent     int            `json:"sent"`
	Statuses map[string]int `json:"statuses"` // by status code; "error" for no answer
	// Pods counts answers by the demo app's "pod" field ("" when the body had none).
	Pods map[string]int `json:"pods"`
	// Latency percentiles and maximum, in milliseconds.
	P50Ms  float64  `json:"p50Ms"`
	P90Ms  float64  `json:"p90Ms"`
	P99Ms  float64  `json:"p99Ms"`
	MaxMs  float64  `json:"maxMs"`
	Errors []string `json:"errors,omitempty"` // the first few transport errors
	// Headers reports the response headers seen, by canonical name (at most
	// MaxResponseHeaders names).
	Headers map[string]HeaderSeen `json:"headers,omitempty"`
	// Answers counts the answers by who gave them and with which status, most first.
	Answers []TrafficAnswer `json:"answers,omitempty"`
}

// Who answered a request (TrafficAnswer.By).
const (
	// AnsweredByApp: an app answered and named its pod (the demo app's "pod" field).
	AnsweredByApp = "app"
	// AnsweredByUpstream: the answer came from upstream (the sidecar reported
	// x-envoy-upstream-service-time, or there was no sidecar) but did not name a pod.
	AnsweredByUpstream = "upstream"
	// AnsweredBySidecar: a sidecar answered itself, no upstream did (a fault abort, no
	// healthy upstream, a route or policy refusal): Envoy's local reply carries no
	// x-envoy-upstream-service-time.
	AnsweredBySidecar = "sidecar"
	// AnsweredByNone: no answer at all (a transport error; Status "error").
	AnsweredByNone = "none"
)

// TrafficAnswer counts the answers with one status from one source.
type TrafficAnswer struct {
	Pod    string `json:"pod,omitempty"` // the pod that answered, when it named itself
	By     string `json:"by"`            // AnsweredByApp, AnsweredByUpstream, AnsweredBySidecar or AnsweredByNone
	Status string `json:"status"`        // the status code, or "error"
	Count  int    `json:"count"`
}

// AddAnswer counts one answer into r.Answers.
func (r *TrafficResult) AddAnswer(pod, by, status string) {
	for i := range r.Answers {
		if a := &r.Answers[i]; a.Pod == pod && a.By == by && a.Status == status {
			a.Count++
			return
		}
	}
	r.Answers = append(r.Answers, TrafficAnswer{Pod: pod, By: by, Status: status, Count: 1})
}

// SortAnswers orders r.Answers by count, then status and pod, so the result is stable.
func (r *TrafficResult) SortAnswers() {
	slices.SortFunc(r.Answers, func(a, b TrafficAnswer) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Status+"\x00"+a.Pod+"\x00"+a.By, b.Status+"\x00"+b.Pod+"\x00"+b.By)
	})
}

// AnsweredBy tells who answered a request from the answer's headers and the pod its body
// named ("" when none): the app when it named its pod, else the upstream when the sidecar
// timed an upstream (x-envoy-upstream-service-time) or no sidecar stood in between, else
// the sidecar itself.
func AnsweredBy(h http.Header, pod string, sidecar bool) string {
	switch {
	case pod != "":
		return AnsweredByApp
	case !sidecar || h.Get("X-Envoy-Upstream-Service-Time") != "":
		return AnsweredByUpstream
	}
	return AnsweredBySidecar
}

// HeaderSeen is one response header over all answers.
type HeaderSeen struct {
	Count  int      `json:"count"`            // answers carrying the header
	Values []string `json:"values,omitempty"` // distinct values, first MaxHeaderValues seen
}

// AddResponseHeaders records one answer's headers into r.Headers, within the bounds.
func (r *TrafficResult) AddResponseHeaders(h http.Header) {
	if r.Headers == nil {
		r.Headers = map[string]HeaderSeen{}
	}
	for name, values := range h {
		name = http.CanonicalHeaderKey(name)
		seen, ok := r.Headers[name]
		if !ok && len(r.Headers) >= MaxResponseHeaders {
			continue
		}
		seen.Count++
		for _, v := range values {
			if len(seen.Values) < MaxHeaderValues && !slices.Contains(seen.Values, v) {
				seen.Values = append(seen.Values, v)
			}
		}
		r.Headers[name] = seen
	}
}

// ErrBadTraffic marks a traffic request the lab cannot send (unknown host, no sidecar...).
var ErrBadTraffic = sentinel("bad traffic request", ErrInvalid)

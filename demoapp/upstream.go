package demoapp

import (
	"encoding/json"
	"io"
	"net/http"
)

// maxUpstreamBody bounds how much of an upstream's answer is read and nested.
const maxUpstreamBody = 1 << 20

// propagatedHeaders are the request and trace headers an app must copy from the request
// it serves to the requests it makes, so that the mesh's proxies can join the spans of
// one request (Istio's distributed tracing docs list them).
var propagatedHeaders = []string{
	"x-request-id",
	"traceparent", "tracestate",
	"b3", "x-b3-traceid", "x-b3-spanid", "x-b3-parentspanid", "x-b3-sampled", "x-b3-flags",
	"x-ot-span-context", "x-cloud-trace-context", "grpc-trace-bin", "sw8",
	"x-datadog-trace-id", "x-datadog-parent-id", "x-datadog-sampling-priority",
}

// upstreamResult is one upstream call in the response.
type upstreamResult struct {
	URL    string `json:"url"`
	Status int    `json:"status,omitempty"`
	// Body is the upstream's answer: its JSON as is, or its text as a JSON string.
	Body  json.RawMessage `json:"body,omitempty"`
	Error string          `json:"error,omitempty"`
}

// callUpstreams calls every upstream in order with the headers of r that carry its trace,
// and returns their answers. A failed call is recorded and the next one still made.
func (h *handler) callUpstreams(r *http.Request) []upstreamResult {
	results := make([]upstreamResult, 0, len(h.cfg.Upstreams))
	for _, u := range h.cfg.Upstreams {
		results = append(results, h.call(r, u))
	}
	return results
}

func (h *handler) call(in *http.Request, url string) upstreamResult {
	res := upstreamResult{URL: url}
	req, err := http.NewRequestWithContext(in.Context(), http.MethodGet, url, nil)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	for _, k := range propagatedHeaders {
		if v := in.Header.Values(k); len(v) > 0 {
			req.Header[http.CanonicalHeaderKey(k)] = v
		}
	}
	resp, err := h.client.Do(req)
	if err != nil {
		res.Error = err.Error()
		h.log.Debug("upstream failed", "url", url, "err", err)
		return res
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody))
	if err != nil {
		res.Error = "read body: " + err.Error()
	}
	if json.Valid(body) {
		res.Body = body
	} else if len(body) > 0 {
		res.Body, _ = json.Marshal(string(body)) // a string always marshals
	}
	return res
}

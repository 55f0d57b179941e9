package web

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/meshlab/meshlab/api"
)

// FuzzTrafficRequest checks that Validate never panics and accepts only http URLs with
// a host and no credentials, and a request count in range.
func FuzzTrafficRequest(f *testing.F) {
	for _, s := range []string{"http://backend:8080/", "sh -c id", "file:///etc/passwd", "http://u:p@h/", "http://[::1]:80/x?y=z", "http://%zz/"} {
		f.Add("frontend-v1", s, 10)
	}
	f.Fuzz(func(t *testing.T, pod, rawURL string, n int) {
		r := api.TrafficRequest{Pod: pod, URL: rawURL, N: n}
		if r.Validate() != nil {
			return
		}
		u, err := url.Parse(rawURL)
		if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || n < 1 || n > api.MaxTrafficRequests || pod == "" {
			t.Errorf("accepted %+v", r)
		}
	})
}

// FuzzGuard checks that no Host, Origin or token gets past the guard without the token.
func FuzzGuard(f *testing.F) {
	f.Add("127.0.0.1:15080", "http://127.0.0.1:15080", "POST", "/v1/traffic?token=x")
	f.Add("localhost:15080", "", "GET", "/")
	f.Add("evil.example", "null", "DELETE", "/v1/events")
	f.Fuzz(func(t *testing.T, host, origin, method, target string) {
		g := Guard{Token: "the-token", Addr: "127.0.0.1:15080"}
		reached := false
		h := g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
		req, err := http.NewRequest(method, "http://127.0.0.1:15080/", nil)
		if err != nil {
			return
		}
		if u, err := url.ParseRequestURI(target); err == nil {
			req.URL = u
		}
		req.Host = host
		req.Header.Set("Origin", origin)
		h.ServeHTTP(httptest.NewRecorder(), req)
		if reached {
			t.Errorf("request without the session reached the handler: %s %s Host %q Origin %q", method, target, host, origin)
		}
	})
}

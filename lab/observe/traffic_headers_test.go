package observe

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/meshlab/meshlab/api"
)

// TestSendAllHeadersAndMethod sends with a method and request headers to a local server
// that echoes them as response headers, and reads them back from the result.
func TestSendAllHeadersAndMethod(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Method", r.Method)
		w.Header().Set("X-User", r.Header.Get("End-User"))
		_, _ = w.Write([]byte(`{"pod":"backend-v2"}`))
	}))
	t.Cleanup(srv.Close)
	r := api.TrafficRequest{Pod: "p", URL: srv.URL + "/", N: 5, Method: http.MethodPost, Headers: map[string]string{"end-user": "jason"}}
	res := sendAll(t.Context(), srv.Client(), r, r.N)
	if res.Statuses["200"] != 5 || res.Pods["backend-v2"] != 5 {
		t.Fatalf("result %+v", res)
	}
	for name, want := range map[string]string{"X-Method": "POST", "X-User": "jason"} {
		if h := res.Headers[name]; h.Count != 5 || len(h.Values) != 1 || h.Values[0] != want {
			t.Errorf("%s: %+v, want 5 answers with %q", name, h, want)
		}
	}
}

package observe

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/meshlab/meshlab/api"
)

// TestSendAllAnswers sends to a server that answers as a sidecar would: in turn an app
// naming its pod (timed upstream), an app naming none (timed upstream), Bookinfo's
// reviews naming it "podname" (timed upstream) and the sidecar's own 503 (no
// x-envoy-upstream-service-time). The answers say who answered, with which status; from
// a pod without a sidecar nothing is put on a sidecar.
func TestSendAllAnswers(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch n.Add(1) % 4 {
		case 0:
			w.Header().Set("X-Envoy-Upstream-Service-Time", "2")
			_, _ = w.Write([]byte(`{"pod":"backend-v1"}`))
		case 2: // Bookinfo's reviews name their pod "podname"
			w.Header().Set("X-Envoy-Upstream-Service-Time", "2")
			_, _ = w.Write([]byte(`{"id":"0","podname":"reviews-v3-7d4c5b6f8-x2k9q","clustername":"null","reviews":[]}`))
		case 1:
			w.Header().Set("X-Envoy-Upstream-Service-Time", "3")
			_, _ = w.Write([]byte(`<html>no identity</html>`))
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("fault filter abort"))
		}
	}))
	t.Cleanup(srv.Close)
	r := api.TrafficRequest{Pod: "client", URL: srv.URL + "/", N: 12}
	res := sendAllFrom(t.Context(), srv.Client(), r, r.N, true)
	want := []api.TrafficAnswer{
		{By: api.AnsweredByUpstream, Status: "200", Count: 3},
		{Pod: "backend-v1", By: api.AnsweredByApp, Status: "200", Count: 3},
		{Pod: "reviews-v3-7d4c5b6f8-x2k9q", By: api.AnsweredByApp, Status: "200", Count: 3},
		{By: api.AnsweredBySidecar, Status: "503", Count: 3},
	}
	if !reflect.DeepEqual(res.Answers, want) {
		t.Errorf("answers from a pod with a sidecar:\n got %+v\nwant %+v", res.Answers, want)
	}
	res = sendAllFrom(t.Context(), srv.Client(), r, r.N, false)
	for _, a := range res.Answers {
		if a.By == api.AnsweredBySidecar {
			t.Errorf("from a pod without a sidecar, %d answers are put on a sidecar: %+v", a.Count, res.Answers)
		}
	}
	if got := countsText(res.Statuses); got != "200 x9, 503 x3" {
		t.Errorf("countsText(%v) = %q, want %q", res.Statuses, got, "200 x9, 503 x3")
	}
}

// TestSendAllTransportError counts a request that got no answer under "none".
func TestSendAllTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens any more
	r := api.TrafficRequest{Pod: "client", URL: url + "/", N: 2}
	res := sendAllFrom(t.Context(), http.DefaultClient, r, r.N, true)
	want := []api.TrafficAnswer{{By: api.AnsweredByNone, Status: "error", Count: 2}}
	if !reflect.DeepEqual(res.Answers, want) {
		t.Errorf("answers: got %+v, want %+v", res.Answers, want)
	}
	if msg := fmt.Sprint(countsText(res.Statuses)); msg != "error x2" {
		t.Errorf("countsText = %q", msg)
	}
}

package httpconn

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
)

// TestRetryAfterLastRequestOfConnectionKeepsNewConnection pins that a retry does not
// inherit the first attempt's Connection: close: the first attempt, sent as the
// upstream request itself, is its connection's last under max_requests_per_connection;
// the retry, on a new connection, must leave that connection open for the next request.
func TestRetryAfterLastRequestOfConnectionKeepsNewConnection(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	up := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	})
	cfg := staticCluster(t, "up", up)
	cfg.MaxRequestsPerConnection = 2
	l := newLab(t, []*cluster.Config{cfg}, routeTo(prefix("/"), &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "up"},
		RetryPolicy:      &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(1)}}))
	for i := range 3 {
		if resp, body := l.get(t, "/"); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("request %d: status %d body %q", i, resp.StatusCode, body)
		}
	}
	// First connection: requests 1 and 2 (its last, answered 503); second: the retry
	// and request 3.
	if got := l.store.Value("cluster.up.upstream_cx_total"); got != 2 {
		t.Errorf("upstream_cx_total = %d, want 2 (the retry's connection reused)", got)
	}
}

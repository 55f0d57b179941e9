package httpconn

import (
	"io"
	"net/http"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
)

// BenchmarkForward measures one keep-alive request through the HCM (fault filter, access
// log, header match, retry policy) to a loopback backend.
// Run: go test ./dataplane/proxy/httpconn -run '^$' -bench Forward
func BenchmarkForward(b *testing.B) {
	// "istio": stream_idle_timeout 0, as istiod and meshlab's generator send on every HCM;
	// "envoy-default": the field unset, so Envoy's 5m stream idle timer runs per request.
	for _, bc := range []struct {
		name   string
		mutate func(*hcmv3.HttpConnectionManager)
	}{
		{"istio", func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(0) }},
		{"envoy-default", nil},
	} {
		b.Run(bc.name, func(b *testing.B) { benchmarkForward(b, bc.mutate) })
	}
}

func benchmarkForward(b *testing.B, mutate func(*hcmv3.HttpConnectionManager)) {
	b.Helper()
	up := backend(b, "up", nil)
	m := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
		Headers: []*routev3.HeaderMatcher{present("x-absent", false, false)}}
	l := newLabHCM(b, mutate, []*cluster.Config{staticCluster(b, "up", up)},
		routeTo(m, &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "up"},
			RetryPolicy: &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(2)}}))
	req, _ := http.NewRequest("GET", "http://"+l.addr+"/", nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := l.client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

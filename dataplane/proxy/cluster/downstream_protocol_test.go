package cluster

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestUseDownstreamProtocolConfigFollowsTheDownstreamProtocol: Istio's inbound and
// passthrough clusters send an HTTP/2 request upstream over HTTP/2 and an HTTP/1.1 one
// over HTTP/1.1, on one cluster.
func TestUseDownstreamProtocolConfigFollowsTheDownstreamProtocol(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Proto)
	}))
	srv.Config.Protocols = new(http.Protocols) // HTTP/1.1 and h2c with prior knowledge
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	opts, err := anypb.New(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{
		UseDownstreamProtocolConfig: &httpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
			HttpProtocolOptions: &corev3.Http1ProtocolOptions{}, Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}}})
	if err != nil {
		t.Fatal(err)
	}
	cl, store := run(t, &clusterv3.Cluster{Name: "inbound|9080||", AltStatName: "inbound|9080||;",
		ConnectTimeout: durationpb.New(1e9), LoadAssignment: cla("inbound|9080||", nil, srv.Listener.Addr().String()),
		TypedExtensionProtocolOptions: map[string]*anypb.Any{httpProtocolOptionsName: opts}})
	send := func(major int) string {
		t.Helper()
		h, err := cl.Pick(netip.AddrPort{})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("GET", "http://x/", nil)
		req.ProtoMajor, req.ProtoMinor = major, 0
		if major == 1 {
			req.ProtoMinor = 1
		}
		resp, err := cl.RoundTrip(req, h)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := send(2); got != "HTTP/2.0" {
		t.Errorf("an HTTP/2 downstream request went upstream as %s", got)
	}
	if got := send(1); got != "HTTP/1.1" {
		t.Errorf("an HTTP/1.1 downstream request went upstream as %s", got)
	}
	// alt_stat_name names the stats, as Envoy's cluster.<alt_stat_name>.*.
	if got := store.Value("cluster.inbound|9080||;.upstream_rq_total"); got != 2 {
		t.Errorf("cluster.<alt_stat_name>.upstream_rq_total = %d, want 2", got)
	}
	if got := store.Value("cluster.inbound|9080||;.upstream_cx_http2_total"); got != 1 {
		t.Errorf("upstream_cx_http2_total = %d, want 1", got)
	}
	if got := store.Value("cluster.inbound|9080||;.upstream_cx_http1_total"); got != 1 {
		t.Errorf("upstream_cx_http1_total = %d, want 1", got)
	}
}

package httpconn

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
)

// TestRequestHeadersAreFinalizedInPlace: Envoy's router finalizes the one request header
// map the connection manager holds (RouteEntry::finalizeRequestHeaders, "done this way
// vs. copying for performance reasons"), so the access log's %REQ(...)% sees the
// headers as sent upstream: the route's request_headers_to_add and
// x-envoy-expected-rq-timeout-ms, without the hop-by-hop fields. The codec's keep-alive
// decision for HTTP/1.0 is the head's as the client sent it, though the router removed
// its Connection field.
func TestRequestHeadersAreFinalizedInPlace(t *testing.T) {
	up := backend(t, "", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "added="+r.Header.Get("X-Route-Added")+" timeout="+r.Header.Get("X-Envoy-Expected-Rq-Timeout-Ms")+
			" te="+r.Header.Get("Te")+" hop="+r.Header.Get("X-Hop"))
	})
	rt := routeTo(prefix("/"), &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "up"},
		Timeout: durationpb.New(3 * time.Second)})
	rt.RequestHeadersToAdd = []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x-route-added", Value: "route"}}}
	l := newLabHCM(t, func(h *hcmv3.HttpConnectionManager) {
		var fl filev3.FileAccessLog
		if err := h.AccessLog[0].GetTypedConfig().UnmarshalTo(&fl); err != nil {
			t.Fatal(err)
		}
		fl.AccessLogFormat = &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{
				InlineString: "%PROTOCOL% added=%REQ(X-ROUTE-ADDED)% timeout=%REQ(X-ENVOY-EXPECTED-RQ-TIMEOUT-MS)% te=%REQ(TE)% connection=%REQ(CONNECTION)% hop=%REQ(X-HOP)%\n"}}}}}
		h.AccessLog[0].ConfigType = &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &fl)}
	}, []*cluster.Config{staticCluster(t, "up", up)}, rt)

	got, open := rawExchange(t, l.addr, "GET /a HTTP/1.0\r\nHost: a\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nTE: trailers, deflate\r\n\r\n", 300*time.Millisecond)
	if !strings.Contains(got, "connection: keep-alive\r\n") || !open {
		t.Errorf("HTTP/1.0 with keep-alive, forwarded: open %v, want the connection kept:\n%s", open, got)
	}
	if want := "\r\n\r\nadded=route timeout=3000 te=trailers hop="; !strings.HasSuffix(got, want) {
		t.Errorf("upstream saw %q, want it to end %q", got, want)
	}
	lines := l.waitLines(t, 1)
	if want := "HTTP/1.0 added=route timeout=3000 te=trailers connection=- hop=-"; lines[0] != want {
		t.Errorf("access log\n got %q\nwant %q (the request headers as finalized for upstream, as Envoy's)", lines[0], want)
	}
}

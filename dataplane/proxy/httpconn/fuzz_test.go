package httpconn

import (
	"context"
	"io"
	"net"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/internal/testutil"
)

// FuzzServeConnRawRequest feeds raw downstream bytes to the connection manager: whatever
// arrives, it must answer or close without panicking or hanging.
func FuzzServeConnRawRequest(f *testing.F) {
	table, err := CompileRoutes(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/d"}},
				Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "ok"}}}}},
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "none"}}}},
		},
	}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("GET /d HTTP/1.1\r\nHost: a\r\n\r\n"))
	f.Add([]byte("GET /x HTTP/1.1\r\nHost: a\r\nX-Request-Id: 1\r\n\r\nGET /d HTTP/1.1\r\nHost: b\r\n\r\n"))
	f.Add([]byte("POST /d HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"))
	f.Add([]byte("GET http://abs/d?q HTTP/1.0\r\n\r\n"))
	f.Add([]byte("\x00\xff garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		store := stats.NewStore()
		deps := Deps{Routes: NewRouteStore(), Clusters: cluster.NewManager(store), Stats: store, Logger: testutil.Logger(t)}
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = io.Copy(io.Discard, client)
		}()
		go func() {
			_, _ = client.Write(data)
			_ = client.Close()
		}()
		ServeConn(context.Background(), &Config{StatPrefix: "f", Inline: table, ServerName: "envoy"}, deps, server, Downstream{})
		_ = server.Close()
		<-done
	})
}

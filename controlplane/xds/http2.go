package xds

import (
	"fmt"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// isHTTP2 reports whether Istio sends a port's traffic upstream as HTTP/2: ports named or
// with appProtocol http2, grpc or grpc-web.
func isHTTP2(p model.Protocol) bool {
	return p == model.ProtocolHTTP2 || p == model.ProtocolGRPC
}

// applyHTTP2 gives a cluster of an HTTP/2 or gRPC port Istio's HttpProtocolOptions with
// explicit http2_protocol_options, unless a DestinationRule's connection pool already
// chose its protocol options (which then carry HTTP/2 too).
func applyHTTP2(c *cluster.Cluster, p model.Protocol) error {
	if !isHTTP2(p) {
		return nil
	}
	if _, ok := c.GetTypedExtensionProtocolOptions()[HTTPProtocolOptionsKey]; ok {
		return nil
	}
	a, err := typed(&upstreamhttp.HttpProtocolOptions{
		UpstreamProtocolOptions: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &upstreamhttp.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &core.Http2ProtocolOptions{}},
		}},
	})
	if err != nil {
		return fmt.Errorf("build http2 protocol options: %w", err)
	}
	if c.TypedExtensionProtocolOptions == nil {
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{}
	}
	c.TypedExtensionProtocolOptions[HTTPProtocolOptionsKey] = a
	return nil
}

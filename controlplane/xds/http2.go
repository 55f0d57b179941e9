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

// applyUpstreamProtocol is istiod's setUpstreamProtocol for a sidecar's or waypoint's
// cluster: a sniffed port's cluster (model.ProtocolAuto) speaks upstream the protocol
// the client spoke (use_downstream_protocol_config, keeping the HTTP/1.1 options a
// DestinationRule chose), and an HTTP/2 or gRPC port's gets HttpProtocolOptions with
// explicit http2_protocol_options, unless a DestinationRule's connection pool already
// chose its protocol options (which then carry HTTP/2 too).
func applyUpstreamProtocol(c *cluster.Cluster, p model.Protocol) error {
	if p.IsAuto() {
		return useDownstreamProtocol(c)
	}
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

// useDownstreamProtocol is istiod's setUseDownstreamProtocol: the cluster's
// HttpProtocolOptions (a DestinationRule's, else new) with use_downstream_protocol_config
// of the explicit HTTP/1.1 options it had and default HTTP/2 options.
func useDownstreamProtocol(c *cluster.Cluster) error {
	opts := &upstreamhttp.HttpProtocolOptions{}
	if a, ok := c.GetTypedExtensionProtocolOptions()[HTTPProtocolOptionsKey]; ok {
		if err := a.UnmarshalTo(opts); err != nil {
			return fmt.Errorf("read http protocol options of %s: %w", c.GetName(), err)
		}
	}
	h1 := opts.GetExplicitHttpConfig().GetHttpProtocolOptions()
	if h1 == nil {
		h1 = &core.Http1ProtocolOptions{}
	}
	opts.UpstreamProtocolOptions = &upstreamhttp.HttpProtocolOptions_UseDownstreamProtocolConfig{
		UseDownstreamProtocolConfig: &upstreamhttp.HttpProtocolOptions_UseDownstreamHttpConfig{
			HttpProtocolOptions:  h1,
			Http2ProtocolOptions: &core.Http2ProtocolOptions{},
		},
	}
	a, err := typed(opts)
	if err != nil {
		return fmt.Errorf("build http protocol options: %w", err)
	}
	if c.TypedExtensionProtocolOptions == nil {
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{}
	}
	c.TypedExtensionProtocolOptions[HTTPProtocolOptionsKey] = a
	return nil
}

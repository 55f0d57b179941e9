package xds

import (
	"fmt"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	router "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// connectTimeout is every generated cluster's connect_timeout (Istio's default).
var connectTimeout = durationpb.New(10e9)

// validator is what every generated Envoy message implements (.pb.validate.go).
type validator interface {
	ValidateAll() error
}

// typed validates msg and packs it as a typed_config. Envoy checks typed configs only
// after unpacking them, so they are validated here, where they are built.
func typed(msg proto.Message) (*anypb.Any, error) {
	if v, ok := msg.(validator); ok {
		if err := v.ValidateAll(); err != nil {
			return nil, fmt.Errorf("validate %s: %w", msg.ProtoReflect().Descriptor().FullName(), err)
		}
	}
	a, err := anypb.New(msg)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", msg.ProtoReflect().Descriptor().FullName(), err)
	}
	return a, nil
}

// adsConfigSource fetches a resource over the proxy's ADS stream and waits for it forever
// (initial_fetch_timeout 0s), as Istio's sidecars do.
func adsConfigSource() *core.ConfigSource {
	return &core.ConfigSource{
		ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}},
		ResourceApiVersion:    core.ApiVersion_V3,
		InitialFetchTimeout:   durationpb.New(0),
	}
}

// socketAddress returns a TCP address.
func socketAddress(addr string, port uint16) *core.Address {
	return &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
		Protocol:      core.SocketAddress_TCP,
		Address:       addr,
		PortSpecifier: &core.SocketAddress_PortValue{PortValue: uint32(port)},
	}}}
}

// tcpProxyFilter returns a tcp_proxy network filter sending every connection to cluster.
func tcpProxyFilter(statPrefix, cluster string) (*listener.Filter, error) {
	cfg, err := typed(&tcpproxy.TcpProxy{
		StatPrefix:       statPrefix,
		ClusterSpecifier: &tcpproxy.TcpProxy_Cluster{Cluster: cluster},
	})
	if err != nil {
		return nil, err
	}
	return &listener.Filter{Name: wellknown.TCPProxy, ConfigType: &listener.Filter_TypedConfig{TypedConfig: cfg}}, nil
}

// hcmFilter returns an http_connection_manager network filter with only the router HTTP
// filter; the caller sets the route specifier.
func hcmFilter(statPrefix string, routes func(*hcm.HttpConnectionManager)) (*listener.Filter, error) {
	rt, err := typed(&router.Router{})
	if err != nil {
		return nil, err
	}
	m := &hcm.HttpConnectionManager{
		StatPrefix: statPrefix,
		CodecType:  hcm.HttpConnectionManager_AUTO,
		HttpFilters: []*hcm.HttpFilter{{
			Name:       wellknown.Router,
			ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: rt},
		}},
	}
	routes(m)
	cfg, err := typed(m)
	if err != nil {
		return nil, err
	}
	return &listener.Filter{Name: wellknown.HTTPConnectionManager, ConfigType: &listener.Filter_TypedConfig{TypedConfig: cfg}}, nil
}

// serviceMetadata records which service a resource was generated from, as Istio does in
// filter_metadata["istio"].config.
func serviceMetadata(svc *model.Service) *core.Metadata {
	return &core.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"istio": {Fields: map[string]*structpb.Value{"config": structpb.NewStringValue(ServiceConfigPath(svc))}},
	}}
}

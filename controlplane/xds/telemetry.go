package xds

import (
	"fmt"

	udpa "github.com/cncf/xds/go/udpa/type/v1"
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	statsapi "istio.io/api/envoy/extensions/stats"
)

// Istio's telemetry filters, as istiod sends them to a sidecar with the default mesh
// config (features.MetadataExchange on; defaultProviders.metrics: prometheus, so the
// Telemetry API's istio.stats filter on every listener class):
//
//   - istio.metadata_exchange network filter first on every virtualInbound chain, its
//     blackhole one included (TCPListenerMx): the server side of the TCP peer metadata
//     exchange over the istio-peer-exchange ALPN;
//   - istio.metadata_exchange upstream cluster filter on every outbound cluster and
//     PassthroughCluster (TCPClusterMx): the client side of that exchange;
//   - the peer_metadata HTTP filter first in every sidecar HCM (named
//     istio.metadata_exchange; SidecarInboundMetadataFilter / SidecarOutboundMetadataFilter):
//     x-envoy-peer-metadata headers;
//   - istio.stats (stats.PluginConfig) before the router of every HCM and before
//     tcp_proxy on every TCP chain except virtualOutbound's loop guard on 15001 (the
//     outbound catch-all, PassthroughCluster or BlackHoleCluster, has it); inbound
//     ones do not fall back to the Host header (disable_host_header_fallback).
const (
	MetadataExchangeFilter = "istio.metadata_exchange"
	StatsFilter            = "istio.stats"

	mxConfigType           = "type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange"
	peerMetadataConfigType = "type.googleapis.com/io.istio.http.peer_metadata.Config"
	peerExchangeALPN       = "istio-peer-exchange"
)

// typedStruct wraps fields in a udpa.type.v1.TypedStruct of typeURL, as istiod's
// protoconv.TypedStructWithFields does for istio-proxy's filters.
func typedStruct(typeURL string, fields map[string]any) (*anypb.Any, error) {
	v, err := structpb.NewStruct(fields)
	if err != nil {
		return nil, err
	}
	// Deterministic: a Struct is a map, and the same config must encode to the same
	// bytes in every generation (snapshots are compared and versioned by content).
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, &udpa.TypedStruct{TypeUrl: typeURL, Value: v}, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, err
	}
	return a, nil
}

func mxConfig() (*anypb.Any, error) {
	return typedStruct(mxConfigType, map[string]any{"protocol": peerExchangeALPN, "enable_discovery": true})
}

// metadataExchangeClusterFilters are the upstream filters of an outbound cluster and
// of PassthroughCluster.
func metadataExchangeClusterFilters() []*cluster.Filter {
	cfg, err := mxConfig()
	if err != nil {
		panic(fmt.Sprintf("istio.metadata_exchange config: %v", err)) // a constant struct always converts
	}
	return []*cluster.Filter{{Name: MetadataExchangeFilter, TypedConfig: cfg}}
}

// peerMetadataHTTPFilter is the peer_metadata filter of an inbound (downstream
// discovery and propagation) or outbound (upstream) HCM.
func peerMetadataHTTPFilter(inbound bool) (*hcm.HttpFilter, error) {
	discovery := []any{map[string]any{"istio_headers": map[string]any{}}, map[string]any{"workload_discovery": map[string]any{}}}
	fields := map[string]any{
		"upstream_discovery":   discovery,
		"upstream_propagation": []any{map[string]any{"istio_headers": map[string]any{}}},
	}
	if inbound {
		fields = map[string]any{
			"downstream_discovery":   discovery,
			"downstream_propagation": []any{map[string]any{"istio_headers": map[string]any{}}},
		}
	}
	cfg, err := typedStruct(peerMetadataConfigType, fields)
	if err != nil {
		return nil, err
	}
	return &hcm.HttpFilter{Name: MetadataExchangeFilter, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: cfg}}, nil
}

// statsConfig is the istio.stats config of a listener of the direction, with the
// Telemetry API's metrics of the plan (telemetry_metrics.go); nil when the plan turns
// the direction's metrics off.
func statsConfig(inbound bool, plan metricsPlan) (*anypb.Any, error) {
	mm := plan.forInbound(inbound)
	if mm.off {
		return nil, nil
	}
	// Deterministic: dimensions are a map (see typedStruct).
	a := &anypb.Any{}
	pc := &statsapi.PluginConfig{DisableHostHeaderFallback: inbound, Metrics: mm.metrics, TcpReportingDuration: plan.reporting}
	if err := anypb.MarshalFrom(a, pc, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, err
	}
	return a, nil
}

// addTelemetryFilters adds Istio's telemetry filters (see above) to a sidecar's
// listeners, after access logs, istio.stats as the metrics plan of the Telemetries
// that apply to the pod sets it.
func addTelemetryFilters(ls []types.Resource, plan metricsPlan) error {
	for _, r := range ls {
		l, ok := r.(*listener.Listener)
		if !ok {
			continue
		}
		inbound := l.GetTrafficDirection() == core.TrafficDirection_INBOUND
		for _, fc := range l.GetFilterChains() {
			if err := addChainTelemetry(fc, inbound, plan); err != nil {
				return fmt.Errorf("add telemetry filters to listener %s chain %q: %w", l.GetName(), fc.GetName(), err)
			}
		}
	}
	return nil
}

func addChainTelemetry(fc *listener.FilterChain, inbound bool, plan metricsPlan) error {
	fs := fc.GetFilters()
	if len(fs) == 0 {
		return nil
	}
	terminal := fs[len(fs)-1]
	switch terminal.GetName() {
	case wellknown.TCPProxy:
		if fc.GetName() == VirtualOutboundListener+"-blackhole" {
			return nil // istiod's loop guard on 15001 carries tcp_proxy alone
		}
		st, err := statsConfig(inbound, plan)
		if err != nil {
			return err
		}
		if st != nil {
			fs = append(fs[:len(fs)-1:len(fs)-1], &listener.Filter{Name: StatsFilter, ConfigType: &listener.Filter_TypedConfig{TypedConfig: st}}, terminal)
		}
	case wellknown.HTTPConnectionManager:
		if err := addHCMTelemetry(terminal, inbound, plan); err != nil {
			return err
		}
	default:
		return nil
	}
	if inbound {
		mx, err := mxConfig()
		if err != nil {
			return err
		}
		fs = append([]*listener.Filter{{Name: MetadataExchangeFilter, ConfigType: &listener.Filter_TypedConfig{TypedConfig: mx}}}, fs...)
	}
	fc.Filters = fs
	return nil
}

// addHCMTelemetry puts the peer_metadata filter first and istio.stats right before
// the router.
func addHCMTelemetry(f *listener.Filter, inbound bool, plan metricsPlan) error {
	pm, err := peerMetadataHTTPFilter(inbound)
	if err != nil {
		return err
	}
	st, err := statsConfig(inbound, plan)
	if err != nil {
		return err
	}
	return addHCMFilters(f, pm, st)
}

// gatewayStatsConfig is the istio.stats config of a gateway's chains (istiod's gateway
// listener class): the client mode's metrics of plan, the Host header never the
// service (disableHostHeaderFallback of the class), the reporter left to the listener's
// direction (outbound: reporter="source"); nil when the plan turns client metrics off.
func gatewayStatsConfig(plan metricsPlan) (*anypb.Any, error) {
	mm := plan.client
	if mm.off {
		return nil, nil
	}
	a := &anypb.Any{}
	pc := &statsapi.PluginConfig{DisableHostHeaderFallback: true, Metrics: mm.metrics, TcpReportingDuration: plan.reporting}
	if err := anypb.MarshalFrom(a, pc, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, err
	}
	return a, nil
}

// addGatewayTelemetry adds Istio's telemetry filters to a gateway's listeners, as
// istiod's listener builder gives the gateway class under the default mesh config
// (buildHTTPConnectionManager's appendMxFilter and Telemetry.HTTPFilters,
// buildCompleteNetworkFilters' TCPFilters): on an HTTP chain the outbound peer_metadata
// filter first (the gateway tells its upstreams who it is, and learns theirs) and
// istio.stats right before the router; on a TCP chain istio.stats right before
// tcp_proxy; istio.stats as gatewayStatsConfig, under the Telemetries that apply to the
// gateway's pod (metricsFor: the root namespace's, its namespace's, those whose
// selector matches its labels).
func addGatewayTelemetry(ls []types.Resource, plan metricsPlan) error {
	st, err := gatewayStatsConfig(plan)
	if err != nil {
		return err
	}
	pm, err := peerMetadataHTTPFilter(false)
	if err != nil {
		return err
	}
	for _, r := range ls {
		l, ok := r.(*listener.Listener)
		if !ok {
			continue
		}
		for _, fc := range l.GetFilterChains() {
			fs := fc.GetFilters()
			if len(fs) == 0 {
				continue
			}
			terminal := fs[len(fs)-1]
			switch terminal.GetName() {
			case wellknown.TCPProxy:
				if st != nil {
					fc.Filters = append(fs[:len(fs)-1:len(fs)-1], &listener.Filter{Name: StatsFilter, ConfigType: &listener.Filter_TypedConfig{TypedConfig: st}}, terminal)
				}
			case wellknown.HTTPConnectionManager:
				if err := addHCMFilters(terminal, pm, st); err != nil {
					return fmt.Errorf("add telemetry filters to listener %s chain %q: %w", l.GetName(), fc.GetName(), err)
				}
			}
		}
	}
	return nil
}

// addHCMFilters puts pm first and istio.stats st (nil: none) right before the router.
func addHCMFilters(f *listener.Filter, pm *hcm.HttpFilter, st *anypb.Any) error {
	m := &hcm.HttpConnectionManager{}
	if err := f.GetTypedConfig().UnmarshalTo(m); err != nil {
		return fmt.Errorf("unpack %s: %w", f.GetName(), err)
	}
	hs := m.GetHttpFilters()
	if len(hs) == 0 {
		return nil
	}
	router := hs[len(hs)-1]
	out := make([]*hcm.HttpFilter, 0, len(hs)+2)
	out = append(out, pm)
	out = append(out, hs[:len(hs)-1]...)
	if st != nil {
		out = append(out, &hcm.HttpFilter{Name: StatsFilter, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: st}})
	}
	out = append(out, router)
	m.HttpFilters = out
	cfg, err := typed(m)
	if err != nil {
		return err
	}
	f.ConfigType = &listener.Filter_TypedConfig{TypedConfig: cfg}
	return nil
}

package peer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	udpav1 "github.com/cncf/xds/go/udpa/type/v1"
	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Config types of istio-proxy's filters that have no Go protos: istiod always sends
// them inside a TypedStruct.
const (
	MXConfigType           = "envoy.tcp.metadataexchange.config.MetadataExchange"
	PeerMetadataConfigType = "io.istio.http.peer_metadata.Config"
)

// TypedStruct returns the type a udpa.type.v1 or xds.type.v3 TypedStruct names and its
// value; ok is false when a is not a TypedStruct.
func TypedStruct(a *anypb.Any) (typeName string, value *structpb.Struct, ok bool, err error) {
	var url string
	switch a.MessageName() {
	case "udpa.type.v1.TypedStruct":
		var ts udpav1.TypedStruct
		if err := a.UnmarshalTo(&ts); err != nil {
			return "", nil, true, err
		}
		url, value = ts.GetTypeUrl(), ts.GetValue()
	case "xds.type.v3.TypedStruct":
		var ts xdstypev3.TypedStruct
		if err := a.UnmarshalTo(&ts); err != nil {
			return "", nil, true, err
		}
		url, value = ts.GetTypeUrl(), ts.GetValue()
	default:
		return "", nil, false, nil
	}
	if i := strings.LastIndexByte(url, '/'); i >= 0 {
		url = url[i+1:]
	}
	if value == nil {
		value = &structpb.Struct{}
	}
	return url, value, true, nil
}

// ResolveTypedStruct returns a with a TypedStruct of a linked type replaced by that
// message (as Envoy converts a TypedStruct to its config type through JSON); an Any that
// is no TypedStruct, or one of a type not linked here, is returned as it is.
func ResolveTypedStruct(a *anypb.Any) (*anypb.Any, error) {
	name, value, ok, err := TypedStruct(a)
	if err != nil || !ok {
		return a, err
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name))
	if err != nil {
		return a, nil
	}
	j, err := protojson.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("TypedStruct %s: %w", name, err)
	}
	m := mt.New().Interface()
	if err := protojson.Unmarshal(j, m); err != nil {
		return nil, fmt.Errorf("TypedStruct %s: value: %w", name, err)
	}
	return anypb.New(m)
}

// decodeStrict decodes a TypedStruct value into v, refusing fields v does not have.
func decodeStrict(typeName string, value *structpb.Struct, v any) error {
	j, err := protojson.Marshal(value)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %s", typeName, strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// CompileMX compiles an istio.metadata_exchange network filter (upstream false) or
// upstream cluster filter (upstream true) from its TypedStruct. Every cluster of a
// sidecar carries the same one, so a compiled filter is kept by its encoding and shared
// (an MX is immutable).
func CompileMX(a *anypb.Any, upstream bool) (*MX, error) {
	key := "d"
	if upstream {
		key = "u"
	}
	key += a.GetTypeUrl() + "\x00" + string(a.GetValue())
	mxCache.mu.Lock()
	mx, ok := mxCache.m[key]
	mxCache.mu.Unlock()
	if ok {
		return mx, nil
	}
	mx, err := compileMX(a, upstream)
	if err != nil {
		return nil, err
	}
	mxCache.mu.Lock()
	if len(mxCache.m) >= maxCachedMX {
		clear(mxCache.m)
	}
	mxCache.m[key] = mx
	mxCache.mu.Unlock()
	return mx, nil
}

// mxCache holds compiled metadata exchange filters by CompileMX's key.
var mxCache = struct {
	mu sync.Mutex
	m  map[string]*MX
}{m: map[string]*MX{}}

// maxCachedMX bounds mxCache; when full it starts again.
const maxCachedMX = 64

func compileMX(a *anypb.Any, upstream bool) (*MX, error) {
	name, value, ok, err := TypedStruct(a)
	if err != nil {
		return nil, fmt.Errorf("typed_config: %w", err)
	}
	if !ok {
		name = string(a.MessageName())
	}
	if name != MXConfigType {
		return nil, fmt.Errorf("typed_config: type %s, want %s", name, MXConfigType)
	}
	var c struct {
		Protocol string `json:"protocol"`
		// enable_discovery lets istio-proxy fall back to the workload metadata
		// discovery (ambient's WDS, the metadata_discovery bootstrap extension) for a
		// peer that sent no metadata. Only a waypoint subscribes to WDS (a sidecar's
		// index is empty: the fallback finds nothing, as in a sidecar-only mesh), and on
		// a waypoint's TCP chains (main_internal) the client it would find by the
		// restored remote address is the downstream_peer connect_terminate already
		// shared, which istio.stats reads; the exchange itself does not look it up.
		EnableDiscovery  bool     `json:"enable_discovery"`
		AdditionalLabels []string `json:"additional_labels"`
	}
	if err := decodeStrict(name, value, &c); err != nil {
		return nil, fmt.Errorf("typed_config.value: %w", err)
	}
	if c.Protocol == "" {
		return nil, errors.New("typed_config.value.protocol: required")
	}
	return &MX{Protocol: c.Protocol, Labels: c.AdditionalLabels, Upstream: upstream}, nil
}

// HTTPFilter is a compiled peer_metadata HTTP filter (io.istio.http.peer_metadata.Config):
// which methods discover the downstream and upstream peers, in order (the first that
// finds a peer wins), and which propagate the local node's metadata. Immutable.
type HTTPFilter struct {
	// Downstream and Upstream are the discovery methods of each side, in order.
	Downstream, Upstream []Method
	// DownstreamHeaders and UpstreamHeaders: an istio_headers method is among them (its
	// headers are removed from the request, the response).
	DownstreamHeaders, UpstreamHeaders bool
	// PropagateDownstream and PropagateUpstream: istio_headers propagation on the
	// response (only when the request carried the headers) and on the request.
	PropagateDownstream, PropagateUpstream bool
	// SkipExternal is istio_headers.skip_external_clusters of upstream propagation.
	SkipExternal bool
	// SharedWithUpstream: the discovered peers' filter state objects are shared with the
	// upstream (internal) connection once, as the filter's shared_with_upstream.
	SharedWithUpstream bool
	Labels             []string
}

// Method is a peer discovery method.
type Method uint8

// The discovery methods the proxy implements: istio_headers (x-envoy-peer-metadata)
// and workload_discovery (the metadata discovery index, by the peer's address).
const (
	MethodHeaders Method = iota + 1
	MethodWorkload
)

type discoveryMethod struct {
	IstioHeaders      *struct{} `json:"istio_headers"`
	WorkloadDiscovery *struct{} `json:"workload_discovery"`
	Baggage           *struct{} `json:"baggage"`
	// upstream_filter_state (istiod sends it with AMBIENT_ENABLE_BAGGAGE) reads a peer
	// the HBONE upstream filters put in the upstream connection's filter state.
	UpstreamFilterState *struct {
		PeerMetadataKey string `json:"peer_metadata_key"`
	} `json:"upstream_filter_state"`
}

type propagationMethod struct {
	IstioHeaders *struct {
		SkipExternalClusters bool `json:"skip_external_clusters"`
	} `json:"istio_headers"`
	Baggage *struct{} `json:"baggage"`
}

// CompileHTTP compiles a peer_metadata HTTP filter from its TypedStruct.
func CompileHTTP(a *anypb.Any) (*HTTPFilter, error) {
	name, value, ok, err := TypedStruct(a)
	if err != nil {
		return nil, fmt.Errorf("typed_config: %w", err)
	}
	if !ok || name != PeerMetadataConfigType {
		return nil, fmt.Errorf("typed_config: not a %s", PeerMetadataConfigType)
	}
	var c struct {
		DownstreamDiscovery   []discoveryMethod   `json:"downstream_discovery"`
		UpstreamDiscovery     []discoveryMethod   `json:"upstream_discovery"`
		DownstreamPropagation []propagationMethod `json:"downstream_propagation"`
		UpstreamPropagation   []propagationMethod `json:"upstream_propagation"`
		SharedWithUpstream    bool                `json:"shared_with_upstream"`
		AdditionalLabels      []string            `json:"additional_labels"`
	}
	if err := decodeStrict(name, value, &c); err != nil {
		return nil, fmt.Errorf("typed_config.value: %w", err)
	}
	f := &HTTPFilter{Labels: c.AdditionalLabels, SharedWithUpstream: c.SharedWithUpstream}
	disc := func(field string, ms []discoveryMethod) ([]Method, bool, error) {
		var out []Method
		headers := false
		for i, m := range ms {
			switch {
			case m.Baggage != nil:
				return nil, false, fmt.Errorf("typed_config.value.%s[%d].baggage: not supported by meshlab proxy", field, i)
			case m.UpstreamFilterState != nil:
				return nil, false, fmt.Errorf("typed_config.value.%s[%d].upstream_filter_state: not supported by meshlab proxy (no HBONE peer metadata filter sets it)", field, i)
			case m.IstioHeaders != nil:
				headers = true
				out = append(out, MethodHeaders)
			case m.WorkloadDiscovery != nil:
				out = append(out, MethodWorkload)
			default:
				return nil, false, fmt.Errorf("typed_config.value.%s[%d]: a discovery method is required", field, i)
			}
		}
		return out, headers, nil
	}
	if f.Downstream, f.DownstreamHeaders, err = disc("downstream_discovery", c.DownstreamDiscovery); err != nil {
		return nil, err
	}
	if f.Upstream, f.UpstreamHeaders, err = disc("upstream_discovery", c.UpstreamDiscovery); err != nil {
		return nil, err
	}
	prop := func(field string, ms []propagationMethod) (bool, bool, error) {
		any, skip := false, false
		for i, m := range ms {
			switch {
			case m.Baggage != nil:
				return false, false, fmt.Errorf("typed_config.value.%s[%d].baggage: not supported by meshlab proxy", field, i)
			case m.IstioHeaders != nil:
				any = true
				skip = skip || m.IstioHeaders.SkipExternalClusters
			default:
				return false, false, fmt.Errorf("typed_config.value.%s[%d]: a propagation method is required", field, i)
			}
		}
		return any, skip, nil
	}
	if f.PropagateDownstream, _, err = prop("downstream_propagation", c.DownstreamPropagation); err != nil {
		return nil, err
	}
	if f.PropagateUpstream, f.SkipExternal, err = prop("upstream_propagation", c.UpstreamPropagation); err != nil {
		return nil, err
	}
	return f, nil
}

// ensure proto is linked for Any resolution of the TypedStruct's wrapped types.
var _ proto.Message = (*structpb.Struct)(nil)

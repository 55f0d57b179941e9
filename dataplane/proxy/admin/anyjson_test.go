package admin

import (
	"encoding/json"
	"strings"
	"testing"

	udpav1 "github.com/cncf/xds/go/udpa/type/v1"
	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestConfigDumpRendersTypedStructAndUnknownAnys: Istio sends extension configs wrapped in
// udpa.type.v1.TypedStruct and xds.type.v3.TypedStruct, and types meshlab proxy does not
// link; /config_dump renders the TypedStructs as JSON and an unknown type opaquely, at any
// depth, instead of answering 500.
func TestConfigDumpRendersTypedStructAndUnknownAnys(t *testing.T) {
	st, err := structpb.NewStruct(map[string]any{"protocols": []any{"istio-http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	udpa, err := anypb.New(&udpav1.TypedStruct{TypeUrl: "type.googleapis.com/istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig", Value: st})
	if err != nil {
		t.Fatal(err)
	}
	xds, err := anypb.New(&xdstypev3.TypedStruct{TypeUrl: "type.googleapis.com/stats.PluginConfig", Value: st})
	if err != nil {
		t.Fatal(err)
	}
	unknownBytes := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "peer")
	unknown := &anypb.Any{TypeUrl: "type.googleapis.com/io.istio.http.peer_metadata.Config", Value: unknownBytes}
	l := &listenerv3.Listener{Name: "virtualOutbound", FilterChains: []*listenerv3.FilterChain{{
		Filters: []*listenerv3.Filter{
			{Name: "istio.alpn", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: udpa}},
			{Name: "istio.stats", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: xds}},
			{Name: "peer", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: unknown}},
		},
	}}}
	la, err := anypb.New(l)
	if err != nil {
		t.Fatal(err)
	}
	ld, err := anypb.New(&adminv3.ListenersConfigDump{DynamicListeners: []*adminv3.ListenersConfigDump_DynamicListener{{
		Name: "virtualOutbound", ActiveState: &adminv3.ListenersConfigDump_DynamicListenerState{Listener: la},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := MarshalJSON(&adminv3.ConfigDump{Configs: []*anypb.Any{ld}})
	if err != nil {
		t.Fatalf("MarshalJSON: %v", err)
	}
	var doc struct {
		Configs []struct {
			DynamicListeners []struct {
				ActiveState struct {
					Listener struct {
						FilterChains []struct {
							Filters []struct {
								TypedConfig map[string]any `json:"typed_config"`
							} `json:"filters"`
						} `json:"filter_chains"`
					} `json:"listener"`
				} `json:"active_state"`
			} `json:"dynamic_listeners"`
		} `json:"configs"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	filters := doc.Configs[0].DynamicListeners[0].ActiveState.Listener.FilterChains[0].Filters
	if got := filters[0].TypedConfig["@type"]; got != "type.googleapis.com/udpa.type.v1.TypedStruct" {
		t.Errorf("udpa TypedStruct @type = %v", got)
	}
	if got := filters[0].TypedConfig["type_url"]; got != "type.googleapis.com/istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig" {
		t.Errorf("udpa TypedStruct type_url = %v", got)
	}
	if got := filters[1].TypedConfig["@type"]; got != "type.googleapis.com/xds.type.v3.TypedStruct" {
		t.Errorf("xds TypedStruct @type = %v", got)
	}
	if _, ok := filters[1].TypedConfig["value"].(map[string]any); !ok {
		t.Errorf("xds TypedStruct value = %v, want the struct", filters[1].TypedConfig["value"])
	}
	if got := filters[2].TypedConfig["@type"]; got != "type.googleapis.com/io.istio.http.peer_metadata.Config" {
		t.Errorf("unknown @type = %v", got)
	}
	// base64 of the original bytes (0a 04 'p' 'e' 'e' 'r').
	if got := filters[2].TypedConfig["value"]; got != "CgRwZWVy" {
		t.Errorf("unknown value = %v, want the base64 of its bytes", got)
	}
	if strings.Contains(string(out), "meshlab/opaque") {
		t.Errorf("the synthetic file name leaked into the dump:\n%s", out)
	}
}

package accesslog

import (
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// The operators istiod's waypoint formats use: filter state objects (PLAIN), dynamic
// metadata by path, the URI SANs of the two certificates; absent values print "-".
func TestWaypointOperators(t *testing.T) {
	md, err := structpb.NewStruct(map[string]any{"double_hbone": map[string]any{"hbone_target_address": "10.0.0.9:15008"}, "n": 3})
	if err != nil {
		t.Fatal(err)
	}
	i := &Info{FilterState: map[string]string{"io.istio.connect_authority": "10.96.0.14:9080"},
		DynamicMetadata: map[string]*structpb.Struct{"istio": md},
		PeerURISAN:      "spiffe://cluster.local/ns/default/sa/curl"}
	for in, want := range map[string]string{
		"%FILTER_STATE(io.istio.connect_authority:PLAIN)%":            "10.96.0.14:9080",
		"%FILTER_STATE(absent:PLAIN)%":                                "-",
		"%DYNAMIC_METADATA(istio:double_hbone:hbone_target_address)%": "10.0.0.9:15008",
		"%DYNAMIC_METADATA(istio:n)%":                                 "3",
		"%DYNAMIC_METADATA(istio:nope)%":                              "-",
		"%DYNAMIC_METADATA(other)%":                                   "-",
		"%DOWNSTREAM_PEER_URI_SAN% %DOWNSTREAM_LOCAL_URI_SAN%":        "spiffe://cluster.local/ns/default/sa/curl -",
	} {
		f, err := CompileFormatString(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got := f.Render(i); got != want {
			t.Errorf("%s = %q, want %q", in, got, want)
		}
	}
	if f, _ := CompileFormatString("x%FILTER_STATE(absent:PLAIN)%"); f.RenderHeader(i) != "x" {
		t.Errorf("an absent value in a header renders empty")
	}
	for _, bad := range []string{"%FILTER_STATE(k)%", "%FILTER_STATE(k:TYPED)%", "%DYNAMIC_METADATA(ns:k):10%"} {
		if _, err := CompileFormatString(bad); err == nil {
			t.Errorf("%s compiled, want it refused", bad)
		}
	}
}

// status_code_filter writes the entries whose code compares to the default value
// (istiod's ">= 400" on connect_terminate's HCM).
func TestStatusCodeFilter(t *testing.T) {
	l := fileLog(t, &filev3.FileAccessLog{Path: "/dev/null"})
	l.Filter = &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_StatusCodeFilter{StatusCodeFilter: &accesslogv3.StatusCodeFilter{
		Comparison: &accesslogv3.ComparisonFilter{Op: accesslogv3.ComparisonFilter_GE, Value: &corev3.RuntimeUInt32{DefaultValue: 400, RuntimeKey: "istio.io/unset"}}}}}
	lg, err := compileOne(l)
	if err != nil {
		t.Fatal(err)
	}
	for code, want := range map[int]bool{200: false, 0: false, 400: true, 503: true} {
		if got := lg.status.match(code); got != want {
			t.Errorf("code %d: written %v, want %v", code, got, want)
		}
	}
}

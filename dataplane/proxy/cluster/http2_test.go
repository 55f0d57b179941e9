package cluster

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func protocolOptions(t *testing.T, o *httpv3.HttpProtocolOptions) map[string]*anypb.Any {
	t.Helper()
	a, err := anypb.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*anypb.Any{httpProtocolOptionsName: a}
}

func TestCompileUpstreamHTTP2ProtocolOptions(t *testing.T) {
	explicit := func(cfg *httpv3.HttpProtocolOptions_ExplicitHttpConfig) *httpv3.HttpProtocolOptions {
		return &httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: cfg}}
	}
	h2 := func(o *corev3.Http2ProtocolOptions) *httpv3.HttpProtocolOptions {
		return explicit(&httpv3.HttpProtocolOptions_ExplicitHttpConfig{ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: o}})
	}
	base := func() *clusterv3.Cluster {
		return &clusterv3.Cluster{Name: "c", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}}
	}
	cases := []struct {
		name       string
		opts       *httpv3.HttpProtocolOptions
		legacy     *corev3.Http2ProtocolOptions
		http2      bool
		downstream bool
		wantErr    string
	}{
		{name: "no protocol options: HTTP/1.1", http2: false},
		{name: "explicit http_protocol_options: HTTP/1.1",
			opts: explicit(&httpv3.HttpProtocolOptions_ExplicitHttpConfig{ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}}})},
		{name: "explicit http2_protocol_options: HTTP/2", http2: true,
			opts: h2(&corev3.Http2ProtocolOptions{})},
		{name: "deprecated cluster http2_protocol_options: HTTP/2", http2: true, legacy: &corev3.Http2ProtocolOptions{}},
		{name: "use_downstream_protocol_config with http2_protocol_options follows the downstream", downstream: true,
			opts: &httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{UseDownstreamProtocolConfig: &httpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
				HttpProtocolOptions: &corev3.Http1ProtocolOptions{}, Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}}}},
		{name: "use_downstream_protocol_config without http2_protocol_options: HTTP/1.1",
			opts: &httpv3.HttpProtocolOptions{UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{UseDownstreamProtocolConfig: &httpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
				HttpProtocolOptions: &corev3.Http1ProtocolOptions{}}}}},
		{name: "upstream max_concurrent_streams is refused",
			opts:    h2(&corev3.Http2ProtocolOptions{MaxConcurrentStreams: wrapperspb.UInt32(10)}),
			wantErr: "max_concurrent_streams"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			if tc.opts != nil {
				c.TypedExtensionProtocolOptions = protocolOptions(t, tc.opts)
			}
			c.Http2ProtocolOptions = tc.legacy //nolint:staticcheck // the deprecated field Envoy still honours is one of the cases
			cfg, err := Compile(c)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Compile error = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.HTTP2 != tc.http2 {
				t.Errorf("HTTP2 = %v, want %v", cfg.HTTP2, tc.http2)
			}
			if cfg.DownstreamHTTP2 != tc.downstream {
				t.Errorf("DownstreamHTTP2 = %v, want %v", cfg.DownstreamHTTP2, tc.downstream)
			}
		})
	}
}

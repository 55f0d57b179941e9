package agent

import (
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	_ "github.com/cncf/xds/go/udpa/type/v1" // TypedStruct in the waypoint bootstrap
)

func TestParseProxyArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    string
		wantErr string
	}{
		{args: nil, want: ""},
		{args: []string{"proxy", "waypoint"}, want: ProxyTypeWaypoint},
		{args: []string{"proxy", "router"}, want: ProxyTypeRouter},
		{args: []string{"proxy", "sidecar"}, want: ProxyTypeSidecar},
		{args: []string{"proxy", "ztunnel"}, wantErr: `proxy type "ztunnel"`},
		{args: []string{"proxy"}, wantErr: `want none or "proxy TYPE"`},
		{args: []string{"run", "waypoint"}, wantErr: `want none or "proxy TYPE"`},
	} {
		got, err := ParseProxyArgs(tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseProxyArgs(%q) = %q, %v; want error %q", tc.args, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseProxyArgs(%q) = %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
}

// The node id's type must be one pilot-agent knows and agree with `proxy TYPE`.
func TestValidateProxyType(t *testing.T) {
	for _, tc := range []struct {
		nodeID, proxyType, wantErr string
	}{
		{nodeID: "waypoint~10.244.0.9~waypoint-5f9c.default~default.svc.cluster.local", proxyType: "waypoint"},
		{nodeID: "waypoint~10.244.0.9~waypoint-5f9c.default~default.svc.cluster.local"},
		{nodeID: "router~10.244.0.9~gw.default~default.svc.cluster.local", proxyType: "waypoint", wantErr: `type "router", but the agent runs ` + "`proxy waypoint`"},
		{nodeID: "ztunnel~10.244.0.9~z.istio-system~istio-system.svc.cluster.local", wantErr: `type "ztunnel" is not sidecar, router or waypoint`},
	} {
		c := fixedPod()
		c.NodeID, c.ProxyType = tc.nodeID, tc.proxyType
		err := c.validate()
		if tc.wantErr == "" && err != nil {
			t.Errorf("%s / %q: %v", tc.nodeID, tc.proxyType, err)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s / %q: error %v, want %q", tc.nodeID, tc.proxyType, err, tc.wantErr)
		}
	}
}

// A waypoint's bootstrap is Istio's waypoint bootstrap: delta ADS and the
// metadata_discovery and internal listener bootstrap extensions; a sidecar's has neither.
func TestWaypointBootstrap(t *testing.T) {
	c := fixedPod()
	c.NodeID = "waypoint~10.244.0.9~waypoint-5f9c.default~default.svc.cluster.local"
	data, err := renderBootstrap(c)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(data, &b); err != nil {
		t.Fatalf("rendered waypoint bootstrap does not parse: %v\n%s", err, data)
	}
	if err := b.ValidateAll(); err != nil {
		t.Error(err)
	}
	if got := b.GetDynamicResources().GetAdsConfig().GetApiType(); got != corev3.ApiConfigSource_DELTA_GRPC {
		t.Errorf("ads api_type = %v, want DELTA_GRPC", got)
	}
	var names []string
	for _, e := range b.GetBootstrapExtensions() {
		names = append(names, e.GetName())
	}
	if got := strings.Join(names, ","); got != "metadata_discovery,envoy.bootstrap.internal_listener" {
		t.Errorf("bootstrap_extensions = %s", got)
	}
	// Everything else is the sidecar's bootstrap.
	b.DynamicResources.AdsConfig.ApiType = corev3.ApiConfigSource_GRPC
	b.BootstrapExtensions = nil
	sc := fixedPod()
	sc.NodeID = c.NodeID
	want := typedBootstrap(t, sc)
	if !proto.Equal(want, &b) {
		t.Errorf("waypoint bootstrap differs from the sidecar's beyond api_type and extensions")
	}
	sidecar, err := renderBootstrap(fixedPod())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sidecar), "bootstrap_extensions") || strings.Contains(string(sidecar), "DELTA_GRPC") {
		t.Errorf("a sidecar's bootstrap has the waypoint's extensions or delta ADS")
	}
}

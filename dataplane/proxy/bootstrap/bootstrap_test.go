package bootstrap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
)

const yamlBoot = `
node:
  id: sidecar~10.244.0.5~web-0.default~default.svc.cluster.local
  cluster: web.default
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: 15000}}
static_resources:
  clusters:
  - name: xds-grpc
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: xds-grpc
      endpoints: [{lb_endpoints: [{endpoint: {address: {pipe: {path: /run/meshlab/lab/xds.sock}}}}]}]
dynamic_resources:
  lds_config: {ads: {}, resource_api_version: V3, initial_fetch_timeout: 0s}
  cds_config: {ads: {}, resource_api_version: V3, initial_fetch_timeout: 0s}
  ads_config:
    api_type: GRPC
    transport_api_version: V3
    set_node_on_first_message_only: true
    grpc_services: [{envoy_grpc: {cluster_name: xds-grpc}}]
`

func write(t *testing.T, name, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadYAMLAndConfigYAMLOverride(t *testing.T) {
	b, err := Load(Source{Path: write(t, "envoy.yaml", yamlBoot), YAML: "node: {cluster: override.default}"})
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(b); err != nil {
		t.Fatal(err)
	}
	if b.GetNode().GetCluster() != "override.default" || b.GetNode().GetId() == "" {
		t.Errorf("node = %v", b.GetNode())
	}
	if XDSCluster(b) != "xds-grpc" {
		t.Errorf("XDSCluster = %q", XDSCluster(b))
	}
}

func TestCheckRefusesWhatIsNotImplemented(t *testing.T) {
	for _, tc := range []struct {
		name, add, want string
	}{
		{"stats_config histogram buckets", "stats_config: {histogram_bucket_settings: [{match: {prefix: x}, buckets: [1]}]}\n", "bootstrap: stats_config.histogram_bucket_settings: field is not supported by meshlab proxy"},
		{"stats tag lookahead", "stats_config: {stats_tags: [{tag_name: x, regex: '^a(?=b)(c)'}]}\n", "stats_tags[0].regex"},
		{"REST xDS", "", ""},
		{"grpc timeout", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := yamlBoot + tc.add
			switch tc.name {
			case "REST xDS":
				data = strings.Replace(yamlBoot, "api_type: GRPC", "api_type: REST", 1)
				tc.want = "dynamic_resources.ads_config.api_type: REST is not supported"
			case "grpc timeout":
				data = strings.Replace(yamlBoot, "[{envoy_grpc: {cluster_name: xds-grpc}}]", "[{envoy_grpc: {cluster_name: xds-grpc}, timeout: 1s}]", 1)
				tc.want = "dynamic_resources.ads_config.grpc_services[0].timeout: field is not supported"
			}
			b, err := Load(Source{Path: write(t, "b.yaml", data)})
			if err == nil {
				err = Check(b)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestUnknownFieldsFailUnlessAllowed(t *testing.T) {
	p := write(t, "b.json", `{"node":{"id":"x"},"no_such_field":1}`)
	if _, err := Load(Source{Path: p}); err == nil {
		t.Error("unknown field accepted without --allow-unknown-static-fields")
	}
	if _, err := Load(Source{Path: p, AllowUnknown: true}); err != nil {
		t.Errorf("unknown field refused with --allow-unknown-static-fields: %v", err)
	}
}

func FuzzParseBootstrap(f *testing.F) {
	f.Add([]byte(yamlBoot), false)
	f.Add([]byte(`{"node":{"id":"x"}}`), true)
	f.Add([]byte("admin: {address: {pipe: {path: /x}}}"), false)
	f.Add([]byte("{"), true)
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		var b bootstrapv3.Bootstrap
		if err := Parse(data, isJSON, false, &b); err != nil {
			return
		}
		if err := Check(&b); err != nil {
			return
		}
		_ = XDSCluster(&b)
	})
}

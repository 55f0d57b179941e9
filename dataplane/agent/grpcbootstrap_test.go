package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The gRPC bootstrap carries what Istio's grpcxds.GenerateBootstrap writes: one insecure
// xds_v3 server, the node with GENERATOR=grpc metadata, the file_watcher provider over
// the certificate files, and the inbound listener template.
func TestGRPCBootstrap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, err := WriteGRPCBootstrap(dir, GRPCBootstrapOptions{
		ServerURI: "unix:///run/x/XDS", NodeID: "sidecar~10.244.0.2~client.default~default.svc.cluster.local",
		Namespace: "default", PodName: "client", InstanceIP: "10.244.0.2", ServiceAccount: "client",
		Labels: map[string]string{"app": "client"}, CertDir: "/certs",
	})
	if err != nil {
		t.Fatalf("WriteGRPCBootstrap: %v", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		XDSServers []struct {
			ServerURI      string                  `json:"server_uri"`
			ChannelCreds   []struct{ Type string } `json:"channel_creds"`
			ServerFeatures []string                `json:"server_features"`
		} `json:"xds_servers"`
		Node struct {
			ID       string         `json:"id"`
			Metadata map[string]any `json:"metadata"`
		} `json:"node"`
		CertProviders map[string]struct {
			PluginName string            `json:"plugin_name"`
			Config     map[string]string `json:"config"`
		} `json:"certificate_providers"`
		Template string `json:"server_listener_resource_name_template"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatalf("decode %s: %v\n%s", path, err, raw)
	}
	if len(b.XDSServers) != 1 || b.XDSServers[0].ServerURI != "unix:///run/x/XDS" || b.XDSServers[0].ChannelCreds[0].Type != "insecure" || b.XDSServers[0].ServerFeatures[0] != "xds_v3" {
		t.Errorf("xds_servers = %+v", b.XDSServers)
	}
	if b.Node.ID != "sidecar~10.244.0.2~client.default~default.svc.cluster.local" || b.Node.Metadata["GENERATOR"] != "grpc" || b.Node.Metadata["NAMESPACE"] != "default" {
		t.Errorf("node = %+v", b.Node)
	}
	p := b.CertProviders["default"]
	if p.PluginName != "file_watcher" || p.Config["certificate_file"] != "/certs/cert-chain.pem" || p.Config["private_key_file"] != "/certs/key.pem" || p.Config["ca_certificate_file"] != "/certs/root-cert.pem" {
		t.Errorf("certificate_providers = %+v", b.CertProviders)
	}
	if b.Template != "xds.istio.io/grpc/lds/inbound/%s" {
		t.Errorf("template = %q", b.Template)
	}
	if _, err := GRPCBootstrap(GRPCBootstrapOptions{NodeID: "x"}); err == nil {
		t.Error("a bootstrap without ServerURI was accepted")
	}
	if err := WriteGRPCCerts(dir, []byte("chain"), []byte("key"), nil, -1); err == nil {
		t.Error("empty roots were accepted")
	}
	if err := WriteGRPCCerts(dir, []byte("chain"), []byte("key"), []byte("roots"), -1); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, GRPCKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v, want mode 0600", fi, err)
	}
}

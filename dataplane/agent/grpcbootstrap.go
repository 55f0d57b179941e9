package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// Proxyless gRPC (Istio's grpc-agent injection template): pilot-agent runs no proxy; it
// writes a gRPC xDS bootstrap that the app's grpc-go reads from the file named by
// GRPC_XDS_BOOTSTRAP, and the workload certificate as files that the bootstrap's
// file_watcher certificate provider reads (pkg/istio-agent/grpcxds in Istio).
const (
	// GRPCBootstrapEnv names the environment variable grpc-go reads the bootstrap path from.
	GRPCBootstrapEnv = "GRPC_XDS_BOOTSTRAP"
	// GRPCBootstrapFile is the bootstrap's file name, as Istio's
	// /etc/istio/proxy/grpc-bootstrap.json.
	GRPCBootstrapFile = "grpc-bootstrap.json"
	// GRPCServerListenerTemplate is the LDS name an xDS-enabled gRPC server asks for,
	// "%s" being its listen address.
	GRPCServerListenerTemplate = "xds.istio.io/grpc/lds/inbound/%s"
	// GRPCCertFile, GRPCKeyFile and GRPCRootFile are the certificate files of the
	// file_watcher provider, as Istio's OUTPUT_CERTS directory holds them.
	GRPCCertFile = "cert-chain.pem"
	GRPCKeyFile  = "key.pem"
	GRPCRootFile = "root-cert.pem"
	// grpcCertRefresh is how often grpc-go re-reads the certificate files (Istio: 15m).
	grpcCertRefresh = "900s"
)

// GRPCBootstrapOptions is what a proxyless pod's gRPC bootstrap says.
type GRPCBootstrapOptions struct {
	// ServerURI is the xDS server's gRPC target ("unix:///path/XDS" for the agent's
	// socket, as Istio's, or "host:port"). Required.
	ServerURI string
	// NodeID is the pod's xDS node id ("sidecar~<ip>~<pod>.<ns>~<ns>.svc.cluster.local").
	// Required.
	NodeID string
	// Namespace, PodName, InstanceIP, ServiceAccount and Labels become the node metadata
	// istiod reads (NAMESPACE, NAME, INSTANCE_IPS, SERVICE_ACCOUNT, LABELS), with
	// GENERATOR "grpc". Optional.
	Namespace, PodName, InstanceIP, ServiceAccount string
	Labels                                         map[string]string
	// CertDir, when set, holds GRPCCertFile, GRPCKeyFile and GRPCRootFile: the bootstrap
	// then defines the "default" file_watcher certificate provider over them. Optional.
	CertDir string
}

// GRPCBootstrap renders the bootstrap as Istio's grpcxds.GenerateBootstrap does: one
// insecure xds_v3 server, the node with its metadata, the file_watcher certificate
// provider and the server listener template.
func GRPCBootstrap(o GRPCBootstrapOptions) ([]byte, error) {
	if o.ServerURI == "" {
		return nil, errors.New("grpc bootstrap: ServerURI is required")
	}
	if o.NodeID == "" {
		return nil, errors.New("grpc bootstrap: NodeID is required")
	}
	meta := map[string]any{"GENERATOR": "grpc"}
	for k, v := range map[string]string{"NAMESPACE": o.Namespace, "NAME": o.PodName, "INSTANCE_IPS": o.InstanceIP, "SERVICE_ACCOUNT": o.ServiceAccount} {
		if v != "" {
			meta[k] = v
		}
	}
	if len(o.Labels) > 0 {
		labels := map[string]any{}
		keys := make([]string, 0, len(o.Labels))
		for k := range o.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			labels[k] = o.Labels[k]
		}
		meta["LABELS"] = labels
	}
	md, err := structpb.NewStruct(meta)
	if err != nil {
		return nil, fmt.Errorf("grpc bootstrap: node metadata: %w", err)
	}
	node, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(&corev3.Node{Id: o.NodeID, Locality: &corev3.Locality{}, Metadata: md})
	if err != nil {
		return nil, fmt.Errorf("grpc bootstrap: node: %w", err)
	}
	type creds struct {
		Type string `json:"type"`
	}
	type server struct {
		ServerURI      string   `json:"server_uri"`
		ChannelCreds   []creds  `json:"channel_creds"`
		ServerFeatures []string `json:"server_features"`
	}
	doc := struct {
		XDSServers    []server                   `json:"xds_servers"`
		Node          json.RawMessage            `json:"node"`
		CertProviders map[string]json.RawMessage `json:"certificate_providers,omitempty"`
		Template      string                     `json:"server_listener_resource_name_template"`
	}{
		XDSServers: []server{{ServerURI: o.ServerURI, ChannelCreds: []creds{{Type: "insecure"}}, ServerFeatures: []string{"xds_v3"}}},
		Node:       node,
		Template:   GRPCServerListenerTemplate,
	}
	if o.CertDir != "" {
		p, err := json.Marshal(map[string]any{
			"plugin_name": "file_watcher",
			"config": map[string]string{
				"certificate_file":    filepath.Join(o.CertDir, GRPCCertFile),
				"private_key_file":    filepath.Join(o.CertDir, GRPCKeyFile),
				"ca_certificate_file": filepath.Join(o.CertDir, GRPCRootFile),
				"refresh_interval":    grpcCertRefresh,
			},
		})
		if err != nil {
			return nil, err
		}
		doc.CertProviders = map[string]json.RawMessage{"default": p}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("grpc bootstrap: %w", err)
	}
	return append(out, '\n'), nil
}

// WriteGRPCBootstrap writes the bootstrap to dir/GRPCBootstrapFile (0644, replaced
// atomically so that an app never reads half a file) and returns its path.
func WriteGRPCBootstrap(dir string, o GRPCBootstrapOptions) (string, error) {
	b, err := GRPCBootstrap(o)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, GRPCBootstrapFile)
	return path, writeAtomic(path, b, 0o644, -1)
}

// WriteGRPCCerts writes the workload certificate chain, its key and the roots into dir
// for the file_watcher provider, each replaced atomically; the key is 0600 and owned by
// uid (the app's) when uid >= 0, so only the app reads it.
func WriteGRPCCerts(dir string, chainPEM, keyPEM, rootsPEM []byte, uid int) error {
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
		uid  int
	}{
		{GRPCRootFile, rootsPEM, 0o644, -1},
		{GRPCCertFile, chainPEM, 0o644, -1},
		{GRPCKeyFile, keyPEM, 0o600, uid},
	} {
		if len(f.data) == 0 {
			return fmt.Errorf("write grpc certificates: %s is empty", f.name)
		}
		if err := writeAtomic(filepath.Join(dir, f.name), f.data, f.mode, f.uid); err != nil {
			return err
		}
	}
	return nil
}

// writeAtomic writes data to a temporary file beside path and renames it over path,
// giving it mode and, when uid >= 0, that owner (and group).
func writeAtomic(path string, data []byte, mode os.FileMode, uid int) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if uid >= 0 {
		if err := tmp.Chown(uid, uid); err != nil {
			tmp.Close()
			return fmt.Errorf("chown %s: %w", path, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

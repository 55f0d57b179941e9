package ztunnel

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Ports ztunnel opens inside every pod it serves, and in its own namespace.
const (
	OutboundPort  = 15001 // REDIRECT target of the pod's outbound TCP (SO_ORIGINAL_DST)
	InboundPort   = 15006 // REDIRECT target of the pod's inbound plaintext TCP
	HBONEPort     = 15008 // mTLS HTTP/2 CONNECT, dialled directly
	DNSPort       = 15053 // DNS proxy, 127.0.0.1, UDP and TCP
	AdminPort     = 15000 // ztunnel's own namespace, 127.0.0.1
	MetricsPort   = 15020 // ztunnel's own namespace
	ReadinessPort = 15021 // ztunnel's own namespace, /healthz/ready
)

// Config is the ztunnel process's configuration, from ztunnel's own environment
// variables (the lab sets them as the real ztunnel's DaemonSet does), plus meshlab's two
// for the files the real ztunnel reads at fixed paths.
type Config struct {
	InpodUDS       string     // required: INPOD_UDS, the node agent's ZDS socket
	XDSAddress     string     // required: XDS_ADDRESS, e.g. unix:///run/meshlab/<lab>/xds.sock
	CAAddress      string     // required: CA_ADDRESS (default XDS_ADDRESS)
	NodeName       string     // required: NODE_NAME; WDS workloads of this node are served
	PodName        string     // required: POD_NAME of ztunnel itself
	PodNamespace   string     // required: POD_NAMESPACE (istio-system)
	InstanceIP     netip.Addr // required: INSTANCE_IP
	ClusterID      string     // optional: CLUSTER_ID (Kubernetes)
	TrustDomain    string     // optional: TRUST_DOMAIN (cluster.local)
	ServiceAccount string     // optional: SERVICE_ACCOUNT (ztunnel)
	TokenFile      string     // required: MESHLAB_TOKEN_FILE, ztunnel's own bearer token
	RootCertFile   string     // required: MESHLAB_ROOT_CERT, the mesh's trust bundle (PEM)
	// DNSUpstream is where a pod's DNS proxy sends names it does not answer, dialled from
	// inside the pod (optional: MESHLAB_DNS_UPSTREAM, default 127.0.0.1:53, the lab's
	// cluster DNS in the pod).
	DNSUpstream netip.AddrPort
	// ProxyMetadata is ISTIO_META_* as node metadata (without the prefix).
	ProxyMetadata map[string]string
}

// ConfigFromEnv reads the configuration from environ (KEY=VALUE entries, as os.Environ).
func ConfigFromEnv(environ []string) (Config, error) {
	env := map[string]string{}
	meta := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
		if m, ok := strings.CutPrefix(k, "ISTIO_META_"); ok {
			meta[m] = v
		}
	}
	c := Config{
		InpodUDS:       env["INPOD_UDS"],
		XDSAddress:     env["XDS_ADDRESS"],
		CAAddress:      env["CA_ADDRESS"],
		NodeName:       env["NODE_NAME"],
		PodName:        env["POD_NAME"],
		PodNamespace:   orDefault(env["POD_NAMESPACE"], "istio-system"),
		ClusterID:      orDefault(env["CLUSTER_ID"], "Kubernetes"),
		TrustDomain:    orDefault(env["TRUST_DOMAIN"], "cluster.local"),
		ServiceAccount: orDefault(env["SERVICE_ACCOUNT"], "ztunnel"),
		TokenFile:      env["MESHLAB_TOKEN_FILE"],
		RootCertFile:   env["MESHLAB_ROOT_CERT"],
		ProxyMetadata:  meta,
		DNSUpstream:    netip.MustParseAddrPort("127.0.0.1:53"),
	}
	if c.CAAddress == "" {
		c.CAAddress = c.XDSAddress
	}
	var errs []error
	if ip := env["INSTANCE_IP"]; ip != "" {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			errs = append(errs, fmt.Errorf("INSTANCE_IP: %w", err))
		}
		c.InstanceIP = a
	}
	if u := env["MESHLAB_DNS_UPSTREAM"]; u != "" {
		a, err := netip.ParseAddrPort(u)
		if err != nil {
			errs = append(errs, fmt.Errorf("MESHLAB_DNS_UPSTREAM: %w", err))
		}
		c.DNSUpstream = a
	}
	for name, v := range map[string]string{
		"INPOD_UDS": c.InpodUDS, "XDS_ADDRESS": c.XDSAddress, "NODE_NAME": c.NodeName,
		"POD_NAME": c.PodName, "MESHLAB_TOKEN_FILE": c.TokenFile, "MESHLAB_ROOT_CERT": c.RootCertFile,
	} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is not set", name))
		}
	}
	if !c.InstanceIP.IsValid() && env["INSTANCE_IP"] == "" {
		errs = append(errs, errors.New("INSTANCE_IP is not set"))
	}
	return c, errors.Join(errs...)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// NodeID is ztunnel's xDS node id: ztunnel~<ip>~<pod>.<ns>~<ns>.svc.cluster.local.
func (c Config) NodeID() string {
	return fmt.Sprintf("ztunnel~%s~%s.%s~%s.svc.cluster.local", c.InstanceIP, c.PodName, c.PodNamespace, c.PodNamespace)
}

// Identity is ztunnel's own SPIFFE id.
func (c Config) Identity() string {
	return "spiffe://" + c.TrustDomain + "/ns/" + c.PodNamespace + "/sa/" + c.ServiceAccount
}

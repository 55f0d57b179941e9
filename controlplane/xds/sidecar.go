package xds

import (
	"fmt"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// A Sidecar's ingress listeners replace the inbound ports of the pods it selects, as
// istiod's buildInboundChainConfigs (listener_inbound.go) and
// buildInboundClustersFromSidecar (cluster.go): each listener's port is a target port of
// its own, whatever the pod's Services say, with its protocol; its cluster
// "inbound|<port>||" goes to its defaultEndpoint (STATIC: 127.0.0.1:PORT, or the pod's
// IP at PORT from 127.0.0.6, istiod's passthrough bind) or, without one, to the original
// destination; the route's decorator and telemetry name the Sidecar
// ("<name>.<namespace>:<port>/*"), istiod's synthetic host for it. With
// ENABLE_TLS_ON_SIDECAR_INGRESS, a listener's tls makes its port's protocol the one
// after TLS termination (HTTPS -> HTTP, TLS -> TCP), and where PeerAuthentication
// leaves the port DISABLE its one chain terminates TLS with the listener's certificate
// files (see sidecarIngressTLSSocket); under STRICT or PERMISSIVE the mesh's mTLS chains
// stand, as istiod's.

// SidecarFor returns the Sidecar whose ingress shapes pod's inbound side, as istiod's
// SidecarScope picks one: a Sidecar of the pod's namespace whose workloadSelector
// matches the pod, else its namespace's Sidecar without a selector, else the root
// namespace's one without a selector; the first in model order (namespace, name) of
// each kind. nil when none, or the one found has no ingress.
func SidecarFor(m *model.Model, pod *model.Pod) *model.IstioConfig[*networking.Sidecar] {
	var nsWide, rootWide *model.IstioConfig[*networking.Sidecar]
	root := m.Mesh.Root()
	for _, s := range m.Istio.Sidecars {
		labels := s.Spec.GetWorkloadSelector().GetLabels()
		switch {
		case len(labels) > 0:
			if s.Namespace == pod.Namespace && labelsMatch(labels, pod.Labels) {
				return withIngress(s)
			}
		case s.Namespace == pod.Namespace && nsWide == nil:
			nsWide = s
		case s.Namespace == root && rootWide == nil:
			rootWide = s
		}
	}
	if nsWide != nil {
		return withIngress(nsWide)
	}
	if rootWide != nil {
		return withIngress(rootWide)
	}
	return nil
}

func withIngress(s *model.IstioConfig[*networking.Sidecar]) *model.IstioConfig[*networking.Sidecar] {
	if len(s.Spec.GetIngress()) == 0 {
		return nil
	}
	return s
}

// sidecarInboundPorts are the inbound ports of pod's Sidecar ingress listeners (nil
// without one), ascending.
func sidecarInboundPorts(m *model.Model, pod *model.Pod) []inboundPort {
	s := SidecarFor(m, pod)
	if s == nil || pod.Router {
		return nil
	}
	var out []inboundPort
	for _, in := range s.Spec.GetIngress() {
		n := uint16(in.GetPort().GetNumber())
		protocol, _ := model.ParseProtocol(in.GetPort().GetProtocol()) // the loader checked it
		ip := inboundPort{target: n, protocol: protocol, host: s.Name + "." + s.Namespace, port: n, sidecar: s}
		if in.GetDefaultEndpoint() != "" {
			if ep, err := model.ParseSidecarEndpoint(in.GetDefaultEndpoint()); err == nil {
				ip.endpoint = &ep
			}
		}
		if t := in.GetTls(); t != nil && m.Mesh.TLSOnSidecarIngress {
			ip.tls = t
			ip.protocol = afterTLSTermination(protocol)
		}
		out = append(out, ip)
	}
	sortInboundPorts(out)
	return out
}

// afterTLSTermination is the protocol a port carries once its TLS is terminated, as
// Istio's Instance.AfterTLSTermination.
func afterTLSTermination(p model.Protocol) model.Protocol {
	switch p {
	case model.ProtocolHTTPS:
		return model.ProtocolHTTP
	case model.ProtocolTLS:
		return model.ProtocolTCP
	}
	return p
}

// sidecarIngressEndpoint makes c, the inbound cluster of a Sidecar ingress port with a
// defaultEndpoint, a STATIC cluster of that one endpoint, as istiod's
// buildInboundCluster: the pod's IP is reached from istiod's passthrough bind address
// (its capture rules would send the proxy's own connection to 127.0.0.1 back to it
// otherwise), 127.0.0.1 directly.
func sidecarIngressEndpoint(c *cluster.Cluster, pod *model.Pod, ep model.SidecarEndpoint) {
	addr := "127.0.0.1"
	if !ep.Localhost {
		addr = pod.IP.String()
	} else {
		c.UpstreamBindConfig = nil
	}
	c.ClusterDiscoveryType = &cluster.Cluster_Type{Type: cluster.Cluster_STATIC}
	c.LbPolicy = cluster.Cluster_ROUND_ROBIN
	c.CleanupInterval = nil
	c.LoadAssignment = &endpoint.ClusterLoadAssignment{
		ClusterName: c.Name,
		Endpoints: []*endpoint.LocalityLbEndpoints{{LbEndpoints: []*endpoint.LbEndpoint{{
			HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{Address: socketAddress(addr, ep.Port)}},
		}}}},
	}
}

// sidecarIngressTLSSocket is the downstream TLS of a Sidecar ingress listener's tls, as
// istiod's BuildListenerTLSContext for a server with certificate files: h2 and
// http/1.1 offered, the certificate and key served by the agent over SDS as
// "file-cert:<serverCertificate>~<privateKey>" and, for MUTUAL, a client certificate
// required and verified against "file-root:<caCertificates>" (istiod's
// ApplyToCommonTLSContext with the files as the proxy's metadata); the files' SDS
// configs keep Envoy's default initial fetch timeout, as istiod's.
func sidecarIngressTLSSocket(t *networking.ServerTLSSettings) (*core.TransportSocket, error) {
	file := func(name string) *tlsv3.SdsSecretConfig {
		c := sdsSecretConfig(name)
		c.SdsConfig.InitialFetchTimeout = nil
		return c
	}
	ctx := &tlsv3.DownstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			AlpnProtocols:                  alpnDownstreamHTTP,
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{file(SecretFileCertPrefix + t.GetServerCertificate() + "~" + t.GetPrivateKey())},
		},
		RequireClientCertificate: wrapperspb.Bool(false),
	}
	if t.GetMode() == networking.ServerTLSSettings_MUTUAL {
		ctx.RequireClientCertificate = wrapperspb.Bool(true)
		ctx.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_CombinedValidationContext{
			CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{},
				ValidationContextSdsSecretConfig: file(SecretFileRootPrefix + t.GetCaCertificates()),
			},
		}
	}
	cfg, err := typed(ctx)
	if err != nil {
		return nil, fmt.Errorf("build sidecar ingress tls: %w", err)
	}
	return &core.TransportSocket{Name: wellknown.TransportSocketTLS, ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: cfg}}, nil
}

// SecretFileCertPrefix names an SDS certificate secret the agent reads from two files,
// as Istio's agent serves "file-cert:<certificate>~<key>".
const SecretFileCertPrefix = "file-cert:"

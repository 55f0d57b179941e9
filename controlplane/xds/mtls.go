package xds

import (
	"fmt"
	"slices"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Names of the transport socket matches of an auto-mTLS cluster, as Istio's.
const (
	TLSModeIstioMatch    = "tlsMode-istio"
	TLSModeDisabledMatch = "tlsMode-disabled"
)

// applyClusterTLS sets how an outbound cluster of a mesh service reaches its endpoints,
// as Istio does: DestinationRule tls.mode ISTIO_MUTUAL makes every connection mTLS,
// SIMPLE and MUTUAL originate TLS with the user's certificates, DISABLE leaves it
// plaintext, and no
// mode means auto-mTLS: mTLS to the endpoints marked tlsMode "istio", plaintext to the
// rest. ServiceEntry clusters get no TLS.
func applyClusterTLS(c *cluster.Cluster, m *model.Model, sp servicePort, oc outboundClusterSpec) error {
	mode := oc.policy.GetTls().GetMode()
	if mode == networking.ClientTLSSettings_SIMPLE || mode == networking.ClientTLSSettings_MUTUAL {
		if cred := oc.policy.GetTls().GetCredentialName(); cred != "" &&
			m.Secret(oc.proxyNS, cred) == nil && m.Secret(oc.proxyNS, cred+credentialCASuffix) == nil {
			// As istiod for a sidecar and a rule without workloadSelector: no TLS,
			// rather than a cluster waiting for a credential no object provides (Envoy
			// would hold the proxy's initialization for it).
			return nil
		}
		return applyOriginationTLS(c, sp, oc.policy.GetTls()) // transportsocket.go
	}
	if sp.se != nil {
		return nil
	}
	if oc.policy.GetTls() != nil && mode != networking.ClientTLSSettings_ISTIO_MUTUAL {
		return nil // DISABLE, or a mode with user-supplied certificates meshlab does not serve
	}
	if mode == networking.ClientTLSSettings_ISTIO_MUTUAL {
		// As istiod: the rule's sni (else the cluster's name form) and subjectAltNames
		// (else the service's accounts), e.g. to reach a gateway's ISTIO_MUTUAL server,
		// which picks its chain by SNI.
		tls := oc.policy.GetTls()
		sans := tls.GetSubjectAltNames()
		if len(sans) == 0 {
			sans = serviceSANs(m, sp, oc.labels)
		}
		mtls, err := upstreamMTLSSocketSNI(sp.port.Port, oc.subset, sp.host, sp.port.Protocol, sans, tls.GetSni())
		if err != nil {
			return err
		}
		c.TransportSocket = mtls
		return nil
	}
	mtls, err := upstreamMTLSSocket(sp.port.Port, oc.subset, sp.host, sp.port.Protocol, serviceSANs(m, sp, oc.labels))
	if err != nil {
		return err
	}
	raw, err := rawBufferSocket()
	if err != nil {
		return err
	}
	c.TransportSocketMatches = []*cluster.Cluster_TransportSocketMatch{
		{
			Name:            TLSModeIstioMatch,
			Match:           &structpb.Struct{Fields: map[string]*structpb.Value{TLSModeKey: structpb.NewStringValue(TLSModeIstio)}},
			TransportSocket: mtls,
		},
		{
			Name:            TLSModeDisabledMatch,
			Match:           &structpb.Struct{},
			TransportSocket: raw,
		},
	}
	if sendsHBONE(m) && c.GetType() != cluster.Cluster_ORIGINAL_DST { // hbone_send.go: HBONE first, to endpoints that speak it
		hbone, err := hboneSocketMatch()
		if err != nil {
			return err
		}
		c.TransportSocketMatches = append([]*cluster.Cluster_TransportSocketMatch{hbone}, c.TransportSocketMatches...)
		if oc.subset == "" { // istiod weighs the service's instances for its default cluster only
			disableMXWhenAllTunnel(c, sp.instances(m))
		}
	}
	return nil
}

// serviceSANs returns the SPIFFE IDs of the distinct service accounts of the pods behind
// sp whose labels match subset (every pod for a nil subset) in the mesh's trust domain
// and, as istiod, in each of its aliases, sorted.
func serviceSANs(m *model.Model, sp servicePort, subset map[string]string) []string {
	var out []string
	for _, ep := range m.Endpoints(sp.svc, sp.port) {
		if !labelsMatch(subset, ep.Pod.Labels) {
			continue
		}
		id := ep.Pod.SpiffeID(m.Mesh.Domain())
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return expandSANs(out, m.Mesh.TrustDomains()[1:])
}

// endpointMetadata returns the filter metadata of an endpoint on the pod's port: for a
// pod with a sidecar its Istio workload and, unless PeerAuthentication disables mTLS on
// that port, the tlsMode "istio" mark that auto-mTLS clusters select mTLS with. A pod
// without a sidecar gets none, so clients reach it in plaintext.
func endpointMetadata(m *model.Model, pod *model.Pod, port uint16) *core.Metadata {
	if pod == nil || !pod.Sidecar.Inject || pod.Router {
		return nil // a gateway's ports take plaintext, as Istio's gateway pods carry no tlsMode label
	}
	md := &core.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"istio": {Fields: map[string]*structpb.Value{"workload": structpb.NewStringValue(workloadID(pod))}},
	}}
	// A proxyless pod carries the tlsMode label only when its user sets it (the
	// grpc-agent template cannot: the app must use xDS credentials), so sidecars reach it
	// in plaintext unless it does.
	proxylessPlain := pod.Sidecar.GRPCAgent && pod.Labels[TLSModeLabel] != TLSModeIstio
	if EffectiveMTLSMode(m, pod, port) != MTLSDisable && !proxylessPlain {
		md.FilterMetadata[TransportSocketMatchKey] = &structpb.Struct{Fields: map[string]*structpb.Value{
			TLSModeKey: structpb.NewStringValue(TLSModeIstio),
		}}
	}
	return md
}

// workloadID is Istio's endpoint workload metadata,
// "<workload>;<namespace>;<canonical service>;<canonical revision>;<cluster>", where the
// canonical service is the app label (else the workload name) and the revision the
// version label (else "latest").
func workloadID(pod *model.Pod) string {
	svc := pod.Labels["app"]
	if svc == "" {
		svc = pod.Workload
	}
	rev := pod.Labels["version"]
	if rev == "" {
		rev = "latest"
	}
	return fmt.Sprintf("%s;%s;%s;%s;Kubernetes", pod.Workload, pod.Namespace, svc, rev)
}

package xds

import (
	"os"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	internalupstream "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// generateTestWaypoint generates m's one waypoint.
func generateTestWaypoint(t *testing.T, m *model.Model) map[resource.Type][]types.Resource {
	t.Helper()
	var spec WaypointSpec
	for _, p := range m.Pods {
		if w, ok := WaypointOf(m, p); ok {
			spec = w
		}
	}
	res, err := GenerateWaypoint(m, spec)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// waypointClusterTLS returns the socket cluster name's internal upstream transport wraps
// and, when it is TLS, its context.
func waypointClusterTLS(t *testing.T, res map[resource.Type][]types.Resource, name string) (*internalupstream.InternalUpstreamTransport, *tlsv3.UpstreamTlsContext) {
	t.Helper()
	var c *cluster.Cluster
	for _, r := range res[resource.ClusterType] {
		if r.(*cluster.Cluster).GetName() == name {
			c = r.(*cluster.Cluster)
		}
	}
	if c == nil {
		t.Fatalf("no cluster %s", name)
	}
	var iu internalupstream.InternalUpstreamTransport
	if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(&iu); err != nil {
		t.Fatalf("%s: transport socket is not internal_upstream: %v", name, err)
	}
	if len(iu.GetPassthroughMetadata()) != 2 {
		t.Errorf("%s: passthrough metadata %v, want original_dst's and istio's", name, iu.GetPassthroughMetadata())
	}
	if iu.GetTransportSocket().GetTypedConfig().MessageName() != "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext" {
		return &iu, nil
	}
	var tc tlsv3.UpstreamTlsContext
	if err := iu.GetTransportSocket().GetTypedConfig().UnmarshalTo(&tc); err != nil {
		t.Fatal(err)
	}
	return &iu, &tc
}

// TestWaypointDestinationRuleTLS: fidelity's tls scenario. A DestinationRule's SIMPLE
// tls in a waypoint originates TLS inside the inbound-vip cluster's internal upstream
// transport (its metadata still passed to connect_originate), ISTIO_MUTUAL adds nothing,
// as istiod's buildWaypointTLSContext; and the waypoint keeps the rest of its
// configuration (a rule's tls once made the whole waypoint's generation fail, so the
// waypoint got no configuration at all).
func TestWaypointDestinationRuleTLS(t *testing.T) {
	t.Parallel()
	res := generateTestWaypoint(t, fidelityWaypointModel(t, "ambient-waypoint-tls"))

	_, simple := waypointClusterTLS(t, res, "inbound-vip|8000|http|httpbin.default.svc.cluster.local")
	if simple == nil {
		t.Fatal("httpbin (SIMPLE): no TLS inside the internal upstream transport")
	}
	if simple.GetSni() != "httpbin.example.com" || len(simple.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()) != 0 ||
		simple.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName() != SecretSystemRoots {
		t.Errorf("httpbin (SIMPLE): sni %q, certificates %v, roots %q", simple.GetSni(), simple.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs(),
			simple.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName())
	}
	for _, host := range []string{"ratings", "reviews"} { // ISTIO_MUTUAL, no rule
		if iu, tc := waypointClusterTLS(t, res, "inbound-vip|9080|http|"+host+".default.svc.cluster.local"); tc != nil || iu.GetTransportSocket().GetName() != "raw_buffer" {
			t.Errorf("%s: inner socket %q, want raw_buffer: HBONE is the mutual TLS", host, iu.GetTransportSocket().GetName())
		}
	}

	// The rest of the waypoint is there: a chain per service port.
	chains := map[string]bool{}
	for _, r := range res[resource.ListenerType] {
		if l := r.(*listener.Listener); l.GetName() == MainInternalListener {
			for _, fc := range l.GetFilterChains() {
				chains[fc.GetName()] = true
			}
		}
	}
	for _, name := range []string{
		"inbound-vip|8000|http|httpbin.default.svc.cluster.local",
		"inbound-vip|9080|http|ratings.default.svc.cluster.local",
		"inbound-vip|9080|http|reviews.default.svc.cluster.local",
	} {
		if !chains[name] {
			t.Errorf("main_internal has no chain %s", name)
		}
	}
}

// TestWaypointDestinationRuleMutualTLS: MUTUAL presents the client certificate of the
// Secret credentialName names, whatever the rule's workloadSelector (istiod withholds it
// from sidecars only), and the waypoint is served that Secret from its namespace; without
// sni the server is named by the service's host (meshlab's departure from istiod's
// auto_sni, as for sidecars).
func TestWaypointDestinationRuleMutualTLS(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../fidelity/testdata/waypoint/ambient-waypoint-tls.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, []byte(`
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: reviews
  namespace: default
spec:
  host: reviews
  trafficPolicy:
    tls:
      mode: MUTUAL
      credentialName: reviews-client
`)...)
	m := buildWaypointModel(t, "mutual.yaml", data)
	m.Secrets = append(m.Secrets, &model.Secret{Name: "reviews-client", Namespace: "default", Cert: []byte("cert"), Key: []byte("key"), CACert: []byte("ca")})
	res := generateTestWaypoint(t, m)

	host := "reviews.default.svc.cluster.local"
	_, mutual := waypointClusterTLS(t, res, "inbound-vip|9080|http|"+host)
	if mutual == nil {
		t.Fatal("reviews (MUTUAL): no TLS inside the internal upstream transport")
	}
	certs := mutual.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()
	if mutual.GetSni() != host || len(certs) != 1 || certs[0].GetName() != "kubernetes://reviews-client" ||
		mutual.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName() != "kubernetes://reviews-client-cacert" {
		t.Errorf("reviews (MUTUAL): sni %q, certificates %v, validation %v", mutual.GetSni(), certs, mutual.GetCommonTlsContext().GetCombinedValidationContext())
	}
	secrets := map[string]bool{}
	for _, s := range res[resource.SecretType] {
		secrets[cachev3.GetResourceName(s)] = true
	}
	if !secrets["kubernetes://reviews-client"] || !secrets["kubernetes://reviews-client-cacert"] {
		t.Errorf("the waypoint is served secrets %v, want reviews-client's certificate and CA", secrets)
	}
}

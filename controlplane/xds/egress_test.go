package xds

import (
	"net/netip"
	"slices"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// The egress tasks' objects as Istio's "Accessing External Services" and "Egress TLS
// Origination" write them.
func httpbinExt() *model.IstioConfig[*networking.ServiceEntry] {
	return se("httpbin-ext", &networking.ServiceEntry{
		Hosts:      []string{"httpbin.org"},
		Ports:      []*networking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}},
		Resolution: networking.ServiceEntry_DNS,
		Location:   networking.ServiceEntry_MESH_EXTERNAL,
	})
}

func googleSE() *model.IstioConfig[*networking.ServiceEntry] {
	return se("google", &networking.ServiceEntry{
		Hosts:      []string{"www.google.com"},
		Ports:      []*networking.ServicePort{{Number: 443, Name: "https", Protocol: "HTTPS"}},
		Resolution: networking.ServiceEntry_DNS,
		Location:   networking.ServiceEntry_MESH_EXTERNAL,
	})
}

func cnnSE() *model.IstioConfig[*networking.ServiceEntry] {
	return se("edition-cnn-com", &networking.ServiceEntry{
		Hosts: []string{"edition.cnn.com"},
		Ports: []*networking.ServicePort{
			{Number: 80, Name: "http-port", Protocol: "HTTP", TargetPort: 443},
			{Number: 443, Name: "https-port", Protocol: "HTTPS"},
		},
		Resolution: networking.ServiceEntry_DNS,
	})
}

func cnnOrigination(tls *networking.ClientTLSSettings) *model.IstioConfig[*networking.DestinationRule] {
	return dr("edition-cnn-com", &networking.DestinationRule{
		Host: "edition.cnn.com",
		TrafficPolicy: &networking.TrafficPolicy{PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{
			Port: &networking.PortSelector{Number: 80},
			Tls:  tls,
		}}},
	})
}

var egressCases = []struct {
	name   string
	mutate func(*model.Model)
}{
	{
		name: "allow-any",
		mutate: func(m *model.Model) {
			m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, httpbinExt(), googleSE())
		},
	},
	{
		name: "registry-only",
		mutate: func(m *model.Model) {
			m.Mesh.OutboundTrafficPolicy = model.RegistryOnly
			m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, httpbinExt(), googleSE())
		},
	},
	{
		name: "tls-origination",
		mutate: func(m *model.Model) {
			m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, cnnSE())
			m.Istio.DestinationRules = append(m.Istio.DestinationRules, cnnOrigination(&networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_SIMPLE}))
		},
	},
	{
		name: "none-sni-ca",
		mutate: func(m *model.Model) {
			m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, se("db-ext", &networking.ServiceEntry{
				Hosts:      []string{"db.example.com"},
				Addresses:  []string{"172.31.0.40"},
				Ports:      []*networking.ServicePort{{Number: 5433, Name: "tls", Protocol: "TLS"}, {Number: 8443, Name: "http", Protocol: "HTTP"}},
				Resolution: networking.ServiceEntry_NONE,
				Location:   networking.ServiceEntry_MESH_EXTERNAL,
			}))
			m.Istio.DestinationRules = append(m.Istio.DestinationRules, dr("db-ext", &networking.DestinationRule{
				Host: "db.example.com",
				TrafficPolicy: &networking.TrafficPolicy{PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{
					Port: &networking.PortSelector{Number: 8443},
					Tls: &networking.ClientTLSSettings{
						Mode: networking.ClientTLSSettings_SIMPLE, Sni: "db.internal.example", SubjectAltNames: []string{"db.example.com"},
						CaCertificates: "/etc/certs/db-ca.pem",
					},
				}}},
			}))
		},
	},
	{
		// The wildcard-egress-hosts task's direct access: "*.wikipedia.org" on 443,
		// resolution NONE, under REGISTRY_ONLY.
		name: "wildcard",
		mutate: func(m *model.Model) {
			m.Mesh.OutboundTrafficPolicy = model.RegistryOnly
			m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, wikipediaSE())
		},
	},
}

func wikipediaSE() *model.IstioConfig[*networking.ServiceEntry] {
	return se("wikipedia", &networking.ServiceEntry{
		Hosts: []string{"*.wikipedia.org"},
		Ports: []*networking.ServicePort{{Number: 443, Name: "https", Protocol: "HTTPS"}},
	})
}

// A wildcard ServiceEntry's HTTPS port is matched by the SNI the client sends, the
// wildcard itself in server_names (Envoy matches en.wikipedia.org and de.wikipedia.org
// against it), to the entry's ORIGINAL_DST cluster: the connection goes on to the
// address the client resolved. Any other SNI is black-holed under REGISTRY_ONLY.
func TestEgressWildcardEntryMatchesSNI(t *testing.T) {
	t.Parallel()
	res := generate(t, egressModel(t, "wildcard"), "productpage-v1")
	l := findListener(t, res, "0.0.0.0_443")
	if len(l.GetFilterChains()) != 1 {
		t.Fatalf("0.0.0.0_443 has %d chains, want 1 (*.wikipedia.org)", len(l.GetFilterChains()))
	}
	fc := l.GetFilterChains()[0]
	if got := fc.GetFilterChainMatch().GetServerNames(); !slices.Equal(got, []string{"*.wikipedia.org"}) {
		t.Errorf("chain server_names = %q, want [*.wikipedia.org]", got)
	}
	if got := tcpProxyCluster(t, fc.GetFilters()[len(fc.GetFilters())-1].GetTypedConfig()); got != "outbound|443||*.wikipedia.org" {
		t.Errorf("SNI chain goes to %q, want outbound|443||*.wikipedia.org", got)
	}
	def := l.GetDefaultFilterChain()
	if got := tcpProxyCluster(t, def.GetFilters()[len(def.GetFilters())-1].GetTypedConfig()); got != BlackHoleCluster {
		t.Errorf("default chain goes to %q, want %s", got, BlackHoleCluster)
	}
	if c := findCluster(t, res, "outbound|443||*.wikipedia.org"); c.GetType() != cluster.Cluster_ORIGINAL_DST {
		t.Errorf("*.wikipedia.org cluster is %s, want ORIGINAL_DST", c.GetType())
	}
}

func TestGenerateEgressGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range egressCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := istioModel()
			tc.mutate(m)
			testutil.Golden(t, "egress-"+tc.name, dumpJSON(t, generate(t, m, "productpage-v1")))
		})
	}
}

// egressModel is istioModel with one egress case applied.
func egressModel(t *testing.T, name string) *model.Model {
	t.Helper()
	for _, c := range egressCases {
		if c.name == name {
			m := istioModel()
			c.mutate(m)
			return m
		}
	}
	t.Fatalf("no egress case %q", name)
	return nil
}

// An HTTPS ServiceEntry without an address gets the listener 0.0.0.0_443 whose chain
// for its host matches the SNI; anything else takes the default chain, to
// PassthroughCluster under ALLOW_ANY and BlackHoleCluster under REGISTRY_ONLY.
func TestEgressTLSListenerMatchesSNI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, catchAll string }{
		{"allow-any", PassthroughCluster},
		{"registry-only", BlackHoleCluster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := generate(t, egressModel(t, tc.name), "productpage-v1")
			l := findListener(t, res, "0.0.0.0_443")
			if len(l.GetFilterChains()) != 1 {
				t.Fatalf("0.0.0.0_443 has %d chains, want 1 (www.google.com)", len(l.GetFilterChains()))
			}
			fc := l.GetFilterChains()[0]
			if got := fc.GetFilterChainMatch().GetServerNames(); !slices.Equal(got, []string{"www.google.com"}) {
				t.Errorf("chain server_names = %q, want [www.google.com]", got)
			}
			if got := tcpProxyCluster(t, fc.GetFilters()[len(fc.GetFilters())-1].GetTypedConfig()); got != "outbound|443||www.google.com" {
				t.Errorf("SNI chain goes to %q, want outbound|443||www.google.com", got)
			}
			def := l.GetDefaultFilterChain()
			if got := tcpProxyCluster(t, def.GetFilters()[len(def.GetFilters())-1].GetTypedConfig()); got != tc.catchAll {
				t.Errorf("default chain goes to %q, want %s", got, tc.catchAll)
			}
			if lf := l.GetListenerFilters(); len(lf) != 1 || lf[0].GetName() != "envoy.filters.listener.tls_inspector" {
				t.Errorf("listener filters = %v, want the TLS inspector alone", lf)
			}
			c := findCluster(t, res, "outbound|443||www.google.com")
			if c.GetType() != cluster.Cluster_STRICT_DNS || c.GetTransportSocket() != nil || c.GetTransportSocketMatches() != nil {
				t.Errorf("www.google.com cluster: type %s, transport socket %v, matches %v; want STRICT_DNS without TLS (the client's TLS passes through)",
					c.GetType(), c.GetTransportSocket(), c.GetTransportSocketMatches())
			}
		})
	}
}

// tcpProxyCluster returns the cluster of a tcp_proxy filter's config.
func tcpProxyCluster(t *testing.T, a *anypb.Any) string {
	t.Helper()
	var tp tcpproxy.TcpProxy
	if err := a.UnmarshalTo(&tp); err != nil {
		t.Fatalf("not a tcp_proxy: %v", err)
	}
	return tp.GetCluster()
}

// upstreamTLS returns the UpstreamTlsContext of a cluster's transport socket.
func upstreamTLS(t *testing.T, c *cluster.Cluster) *tlsv3.UpstreamTlsContext {
	t.Helper()
	if c.GetTransportSocket() == nil {
		t.Fatalf("cluster %s has no transport socket", c.GetName())
	}
	var u tlsv3.UpstreamTlsContext
	if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(&u); err != nil {
		t.Fatalf("cluster %s: %v", c.GetName(), err)
	}
	return &u
}

// The TLS origination task: port 80 of edition.cnn.com sends to its port 443 (targetPort)
// with TLS the sidecar originates, verified against the proxy's system roots (file-root:system
// from the agent) and the host's name; port 443 stays the client's own TLS, untouched.
func TestEgressTLSOrigination(t *testing.T) {
	t.Parallel()
	res := generate(t, egressModel(t, "tls-origination"), "productpage-v1")
	c80 := findCluster(t, res, "outbound|80||edition.cnn.com")
	u := upstreamTLS(t, c80)
	if u.GetSni() != "edition.cnn.com" {
		t.Errorf("sni = %q, want edition.cnn.com", u.GetSni())
	}
	cv := u.GetCommonTlsContext().GetCombinedValidationContext()
	if got := cv.GetValidationContextSdsSecretConfig().GetName(); got != SecretSystemRoots {
		t.Errorf("validation secret = %q, want %q", got, SecretSystemRoots)
	}
	if got := cv.GetValidationContextSdsSecretConfig().GetSdsConfig().GetApiConfigSource().GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName(); got != SDSCluster {
		t.Errorf("validation secret comes from %q, want the agent (%s)", got, SDSCluster)
	}
	if sans := cv.GetDefaultValidationContext().GetMatchSubjectAltNames(); len(sans) != 1 || sans[0].GetExact() != "edition.cnn.com" { //nolint:staticcheck // the deprecated field istiod sends
		t.Errorf("SAN matchers = %v, want exactly edition.cnn.com", sans)
	}
	if len(u.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()) != 0 {
		t.Error("SIMPLE TLS presents a client certificate; it must not")
	}
	la := c80.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if la.GetAddress() != "edition.cnn.com" || la.GetPortValue() != 443 {
		t.Errorf("port 80 resolves %s:%d, want edition.cnn.com:443 (the targetPort)", la.GetAddress(), la.GetPortValue())
	}
	if c443 := findCluster(t, res, "outbound|443||edition.cnn.com"); c443.GetTransportSocket() != nil {
		t.Error("port 443 got a TLS socket; the DestinationRule names port 80 only")
	}
}

// resolution NONE is an ORIGINAL_DST cluster without EDS; sni, subjectAltNames and
// caCertificates are used as written.
func TestEgressNoneResolutionAndExplicitTLS(t *testing.T) {
	t.Parallel()
	res := generate(t, egressModel(t, "none-sni-ca"), "productpage-v1")
	c := findCluster(t, res, "outbound|8443||db.example.com")
	if c.GetType() != cluster.Cluster_ORIGINAL_DST || c.GetLbPolicy() != cluster.Cluster_CLUSTER_PROVIDED {
		t.Errorf("cluster type %s lb %s, want ORIGINAL_DST with CLUSTER_PROVIDED", c.GetType(), c.GetLbPolicy())
	}
	for _, r := range res[resource.EndpointType] {
		if name := r.(interface{ GetClusterName() string }).GetClusterName(); name == c.GetName() {
			t.Errorf("EDS assignment for ORIGINAL_DST cluster %s", name)
		}
	}
	u := upstreamTLS(t, c)
	cv := u.GetCommonTlsContext().GetCombinedValidationContext()
	//nolint:staticcheck // match_subject_alt_names is deprecated, and istiod sends it
	if u.GetSni() != "db.internal.example" || cv.GetValidationContextSdsSecretConfig().GetName() != "file-root:/etc/certs/db-ca.pem" ||
		cv.GetDefaultValidationContext().GetMatchSubjectAltNames()[0].GetExact() != "db.example.com" {
		t.Errorf("tls = sni %q, roots %q, SANs %v; want the rule's own", u.GetSni(), cv.GetValidationContextSdsSecretConfig().GetName(), cv.GetDefaultValidationContext().GetMatchSubjectAltNames())
	}
	// An address makes the TLS port a VIP listener, not a wildcard one.
	findListener(t, res, "172.31.0.40_5433")
	for _, l := range res[resource.ListenerType] {
		if l.(interface{ GetName() string }).GetName() == "0.0.0.0_5433" {
			t.Error("0.0.0.0_5433 exists though the entry has an address")
		}
	}
}

// A SIMPLE rule with credentialName verifies against the Secret's CA, served over ADS
// as kubernetes://<name>-cacert.
func TestEgressCredentialNameCA(t *testing.T) {
	t.Parallel()
	m := istioModel()
	m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, cnnSE())
	m.Istio.DestinationRules = append(m.Istio.DestinationRules, cnnOrigination(&networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_SIMPLE, CredentialName: "cnn-ca"}))
	m.Secrets = append(m.Secrets, &model.Secret{Name: "cnn-ca", Namespace: "default", CACert: []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")})
	res := generate(t, m, "productpage-v1")
	u := upstreamTLS(t, findCluster(t, res, "outbound|80||edition.cnn.com"))
	vs := u.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig()
	if vs.GetName() != "kubernetes://cnn-ca-cacert" || vs.GetSdsConfig().GetAds() == nil {
		t.Errorf("validation secret %q (ads %v), want kubernetes://cnn-ca-cacert over ADS", vs.GetName(), vs.GetSdsConfig().GetAds())
	}
	var found bool
	for _, r := range res[resource.SecretType] {
		if s := r.(*tlsv3.Secret); s.GetName() == "kubernetes://cnn-ca-cacert" {
			found = string(s.GetValidationContext().GetTrustedCa().GetInlineBytes()) == string(m.Secrets[0].CACert)
		}
	}
	if !found {
		t.Errorf("secrets %v: want kubernetes://cnn-ca-cacert holding the Secret's CA", res[resource.SecretType])
	}
	// Another pod's namespace has no such Secret: nothing is served there.
	for _, r := range generate(t, m, "tester")[resource.SecretType] {
		t.Errorf("pod in qa got secret %s; the Secret lives in default", r.(*tlsv3.Secret).GetName())
	}
}

// A MUTUAL rule with credentialName presents the Secret's certificate and verifies
// the server against its CA, both over ADS as istiod's SecretGen serves them
// (kubernetes://<name>, kubernetes://<name>-cacert), in Generate and in the scoped
// generation the discovery server pushes; a pod of another namespace gets neither.
func TestEgressMutualOrigination(t *testing.T) {
	t.Parallel()
	m := istioModel()
	m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, cnnSE())
	m.Istio.DestinationRules = append(m.Istio.DestinationRules, cnnOrigination(&networking.ClientTLSSettings{
		Mode: networking.ClientTLSSettings_MUTUAL, CredentialName: "client-credential", Sni: "edition.cnn.com",
	}))
	sec := &model.Secret{
		Name: "client-credential", Namespace: "default",
		Cert: []byte("client cert"), Key: []byte("client key"), CACert: []byte("server ca"),
	}
	m.Secrets = append(m.Secrets, sec)
	res := generate(t, m, "productpage-v1")
	u := upstreamTLS(t, findCluster(t, res, "outbound|80||edition.cnn.com"))
	certs := u.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()
	if len(certs) != 1 || certs[0].GetName() != "kubernetes://client-credential" || certs[0].GetSdsConfig().GetAds() == nil {
		t.Errorf("client certificate configs %v, want kubernetes://client-credential over ADS", certs)
	}
	vs := u.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig()
	if vs.GetName() != "kubernetes://client-credential-cacert" || vs.GetSdsConfig().GetAds() == nil {
		t.Errorf("validation secret %q, want kubernetes://client-credential-cacert over ADS", vs.GetName())
	}
	if u.GetSni() != "edition.cnn.com" {
		t.Errorf("sni %q, want the rule's", u.GetSni())
	}
	scoped, err := GenerateTypes(m, m.Pod("productpage-v1"), resource.SecretType)
	if err != nil {
		t.Fatal(err)
	}
	for name, secrets := range map[string][]types.Resource{"Generate": res[resource.SecretType], "GenerateTypes": scoped[resource.SecretType]} {
		got := map[string]*tlsv3.Secret{}
		for _, r := range secrets {
			got[r.(*tlsv3.Secret).GetName()] = r.(*tlsv3.Secret)
		}
		cert, ca := got["kubernetes://client-credential"], got["kubernetes://client-credential-cacert"]
		if len(got) != 2 || string(cert.GetTlsCertificate().GetCertificateChain().GetInlineBytes()) != "client cert" ||
			string(cert.GetTlsCertificate().GetPrivateKey().GetInlineBytes()) != "client key" ||
			string(ca.GetValidationContext().GetTrustedCa().GetInlineBytes()) != "server ca" {
			t.Errorf("%s secrets %v: want the Secret's certificate and key, and its CA", name, got)
		}
	}
	tester := generate(t, m, "tester")
	for _, r := range tester[resource.SecretType] {
		t.Errorf("pod in qa got secret %s; the Secret lives in default", r.(*tlsv3.Secret).GetName())
	}
	// Without the Secret in its namespace, the proxy gets no TLS for the rule (as
	// istiod's sidecars), never a cluster waiting for a credential nothing provides.
	if ts := findCluster(t, tester, "outbound|80||edition.cnn.com").GetTransportSocket(); ts != nil {
		t.Errorf("pod in qa (no client-credential there) got a TLS socket %v", ts)
	}
	// A DestinationRule change alone re-sends secrets (its credentialName may be new).
	old := *m
	old.Istio.DestinationRules = m.Istio.DestinationRules[:len(m.Istio.DestinationRules)-1]
	if typs := ChangedTypes(&old, m); !slices.Contains(typs, resource.SecretType) {
		t.Errorf("ChangedTypes after a DestinationRule change = %v, want secrets among them", typs)
	}
}

// ISTIO_MUTUAL takes the rule's sni and subjectAltNames, as istiod: the egress gateway
// task reaches the gateway's ISTIO_MUTUAL server by the external host's name.
func TestIstioMutualSNI(t *testing.T) {
	t.Parallel()
	m := istioModel()
	m.Istio.DestinationRules = append(m.Istio.DestinationRules, dr("reviews", &networking.DestinationRule{
		Host: "reviews",
		TrafficPolicy: &networking.TrafficPolicy{Tls: &networking.ClientTLSSettings{
			Mode: networking.ClientTLSSettings_ISTIO_MUTUAL, Sni: "nginx.example.com",
		}},
	}))
	res := generate(t, m, "productpage-v1")
	u := upstreamTLS(t, findCluster(t, res, "outbound|9080||reviews.default.svc.cluster.local"))
	if u.GetSni() != "nginx.example.com" {
		t.Errorf("sni %q, want the rule's nginx.example.com", u.GetSni())
	}
	if c := u.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs(); len(c) != 1 || c[0].GetName() != SecretCertificate {
		t.Errorf("certificate %v, want the workload's (%s)", c, SecretCertificate)
	}
	m.Istio.DestinationRules[len(m.Istio.DestinationRules)-1].Spec.TrafficPolicy.Tls.Sni = ""
	u = upstreamTLS(t, findCluster(t, generate(t, m, "productpage-v1"), "outbound|9080||reviews.default.svc.cluster.local"))
	if u.GetSni() != "outbound_.9080_._.reviews.default.svc.cluster.local" {
		t.Errorf("sni without the rule's %q, want the cluster's", u.GetSni())
	}
}

// istiod's port-80 rule: a mesh VirtualService's host without an HTTP port 80 (the
// egress task's my-nginx, a Service of port 443 only) gets a virtual host "<host>:80"
// on route 80 with the VirtualService's port-80 routes; other routes do not get it.
func TestPort80VirtualServiceHost(t *testing.T) {
	t.Parallel()
	m := istioModel()
	m.Services = append(m.Services, &model.Service{
		Name: "web", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.30"), Selector: map[string]string{"app": "web"},
		Ports: []model.ServicePort{{Name: "http", Port: 80, TargetPort: 8080, Protocol: model.ProtocolHTTP}},
	})
	m.Istio.VirtualServices = append(m.Istio.VirtualServices, vs("db", &networking.VirtualService{
		Hosts: []string{"db.default.svc.cluster.local"},
		Http: []*networking.HTTPRoute{{
			Match: []*networking.HTTPMatchRequest{{Port: 80}},
			Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "reviews.default.svc.cluster.local", Port: &networking.PortSelector{Number: 9080}}}},
		}},
	}))
	res := generate(t, m, "productpage-v1")
	var found bool
	for _, r := range res[resource.RouteType] {
		rc := r.(*route.RouteConfiguration)
		for _, vh := range rc.GetVirtualHosts() {
			if vh.GetName() != "db.default.svc.cluster.local:80" {
				continue
			}
			if rc.GetName() != "80" {
				t.Errorf("route %s has %s; only route 80 should", rc.GetName(), vh.GetName())
				continue
			}
			found = true
			if !slices.Equal(vh.GetDomains(), []string{"db.default.svc.cluster.local"}) ||
				vh.GetRoutes()[0].GetRoute().GetCluster() != "outbound|9080||reviews.default.svc.cluster.local" {
				t.Errorf("virtual host %v: want domain db.default.svc.cluster.local routed to reviews:9080", vh)
			}
		}
	}
	if !found {
		t.Error("route 80 has no virtual host db.default.svc.cluster.local:80")
	}
}

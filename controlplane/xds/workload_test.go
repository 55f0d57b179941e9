package xds

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

var wdsOpts = WDSOptions{Node: "ml-test-node"}

// ambientModel is istioModel with productpage and reviews-v1 enrolled in ambient (no
// sidecar, the node agent's redirection annotation), reviews-v2 labelled ambient but not
// yet redirected, and an ingress gateway.
func ambientModel() *model.Model {
	m := istioModel()
	for _, name := range []string{"productpage-v1", "reviews-v1"} {
		p := m.Pod(name)
		p.Sidecar.Inject = false
		p.Annotations = map[string]string{model.AnnotationAmbientRedirection: model.AmbientRedirectionEnabled}
	}
	m.Pod("reviews-v2").Sidecar.Inject = false
	m.Pod("reviews-v2").Labels[model.LabelDataplaneMode] = model.DataplaneModeAmbient
	gw := &model.Pod{
		Name: "istio-ingressgateway-5c8f8f8d9b-abcde", Namespace: "istio-system", Workload: "istio-ingressgateway",
		Labels:         map[string]string{"app": "istio-ingressgateway", "istio": "ingressgateway"},
		ServiceAccount: "istio-ingressgateway-service-account", IP: netip.MustParseAddr("10.244.0.2"), Router: true,
	}
	gwSvc := &model.Service{
		Name: "istio-ingressgateway", Namespace: "istio-system", VIP: netip.MustParseAddr("10.96.0.10"),
		Selector: map[string]string{"istio": "ingressgateway"},
		Ports: []model.ServicePort{
			{Name: "status-port", Port: 15021, TargetPort: 15021, Protocol: model.ProtocolTCP},
			{Name: "http2", Port: 80, TargetPort: 8080, Protocol: model.ProtocolHTTP2},
			{Name: "https", Port: 443, TargetPort: 8443, Protocol: model.ProtocolHTTPS},
		},
	}
	n := model.New(append(m.Services, gwSvc), append(m.Pods, gw))
	n.Istio, n.Mesh = m.Istio, m.Mesh
	n.Namespaces = []*model.Namespace{{Name: "default", Labels: map[string]string{model.LabelDataplaneMode: "ambient"}}}
	return n
}

// dumpWDS renders WDS resources by resource name, as protojson, for golden files.
func dumpWDS(t *testing.T, m *model.Model, o WDSOptions) []byte {
	t.Helper()
	doc := map[string]map[string]json.RawMessage{"addresses": {}, "authorizations": {}}
	add := func(kind, name string, msg proto.Message) {
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(msg)
		if err != nil {
			t.Fatalf("marshal %s: %v", name, err)
		}
		if _, dup := doc[kind][name]; dup {
			t.Fatalf("two %s named %s", kind, name)
		}
		doc[kind][name] = b
	}
	for _, a := range Addresses(m, o) {
		add("addresses", AddressName(a), a)
	}
	for _, a := range Authorizations(m) {
		add("authorizations", AuthorizationName(a), a)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(generic, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// wdsCases are WDS's features, one golden file each (testdata/wds-<name>.golden).
var wdsCases = []struct {
	name   string
	mutate func(*model.Model)
}{
	{"ambient", func(*model.Model) {}},
	{"serviceentry", func(m *model.Model) {
		m.Istio.ServiceEntries = append(m.Istio.ServiceEntries,
			se("external", &networking.ServiceEntry{
				Hosts: []string{"api.example.com", "www.example.com"}, Addresses: []string{"192.0.2.10", "198.51.100.0/24"},
				Ports:      []*networking.ServicePort{{Number: 443, Name: "https", Protocol: "TLS"}, {Number: 80, Name: "http", Protocol: "HTTP", TargetPort: 8080}},
				Resolution: networking.ServiceEntry_DNS, Location: networking.ServiceEntry_MESH_EXTERNAL,
			}),
			se("passthrough", &networking.ServiceEntry{
				Hosts: []string{"db.internal"}, Ports: []*networking.ServicePort{{Number: 5432, Name: "tcp", Protocol: "TCP"}},
				Resolution: networking.ServiceEntry_NONE, SubjectAltNames: []string{"spiffe://cluster.local/ns/db/sa/db"},
			}),
			// Names a Kubernetes Service's host: it is the namespace's one service for that host
			// (the Service wins) and not canonical.
			se("reviews-shadow", &networking.ServiceEntry{
				Hosts: []string{"reviews.default.svc.cluster.local"}, Ports: []*networking.ServicePort{{Number: 9080, Name: "http", Protocol: "HTTP"}},
				Resolution: networking.ServiceEntry_STATIC,
			}),
			// Endpoints become Workloads, an endpoint's named port taking the port.
			se("vms", &networking.ServiceEntry{
				Hosts: []string{"vm.mesh.internal"}, Addresses: []string{"240.0.0.5"},
				Ports:      []*networking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP", TargetPort: 8080}, {Number: 9000, Name: "tcp-admin", Protocol: "TCP"}},
				Resolution: networking.ServiceEntry_STATIC,
				Endpoints: []*networking.WorkloadEntry{
					{Address: "192.0.2.20", ServiceAccount: "vm", Ports: map[string]uint32{"http": 9080}, Locality: "us-east/zone-a", Weight: 3},
					{Address: "vm2.example.com", Network: "far"},
				},
			}),
			// A workloadSelector puts the ServiceEntry in the selected pods' services maps.
			se("db-alias", &networking.ServiceEntry{
				Hosts: []string{"db.mesh.internal"}, Ports: []*networking.ServicePort{{Number: 5432, Name: "tcp", Protocol: "TCP", TargetPort: 5433}},
				Resolution: networking.ServiceEntry_STATIC, WorkloadSelector: &networking.WorkloadSelector{Labels: map[string]string{"app": "db"}},
			}),
		)
	}},
	{"authz", func(m *model.Model) {
		m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies,
			// Istio's ambient Getting Started, L4 part.
			ap("default", "productpage-ztunnel", &security.AuthorizationPolicy{
				Selector: selApp("productpage"), Action: security.AuthorizationPolicy_ALLOW,
				Rules: []*security.Rule{{From: []*security.Rule_From{{Source: &security.Source{
					Principals: []string{"cluster.local/ns/default/sa/bookinfo-gateway-istio"},
				}}}}},
			}),
			// An ALLOW rule with HTTP attributes is dropped (fails closed); its L4 rule stays.
			ap("default", "reviews-get", &security.AuthorizationPolicy{
				Selector: selApp("reviews"),
				Rules: []*security.Rule{
					{To: []*security.Rule_To{{Operation: &security.Operation{Methods: []string{"GET"}, Ports: []string{"9080"}}}}},
					{From: []*security.Rule_From{{Source: &security.Source{Namespaces: []string{"default", "qa*"}, ServiceAccounts: []string{"productpage", "qa/tester"}}}}},
				},
			}),
			// A DENY keeps its L4 parts without the HTTP ones: more restrictive.
			ap("default", "deny-path", &security.AuthorizationPolicy{
				Action: security.AuthorizationPolicy_DENY,
				Rules: []*security.Rule{{
					From: []*security.Rule_From{{Source: &security.Source{NotPrincipals: []string{"*"}, IpBlocks: []string{"10.244.0.0/16", "10.244.0.15"}, RequestPrincipals: []string{"*"}}}},
					To:   []*security.Rule_To{{Operation: &security.Operation{Paths: []string{"/admin*"}, NotPorts: []string{"15021"}}}},
					When: []*security.Condition{
						{Key: "request.headers[x-debug]", Values: []string{"1"}},
						{Key: "source.ip", NotValues: []string{"10.244.0.10"}},
						{Key: "destination.port", Values: []string{"9080"}},
					},
				}},
			}),
			ap("istio-system", "global-deny-qa", &security.AuthorizationPolicy{
				Action: security.AuthorizationPolicy_DENY,
				Rules:  []*security.Rule{{From: []*security.Rule_From{{Source: &security.Source{Namespaces: []string{"qa"}}}}}},
			}),
			// Root-namespace selector policies apply in every namespace.
			ap("istio-system", "db-ports", &security.AuthorizationPolicy{
				Selector: selApp("db"),
				Rules:    []*security.Rule{{To: []*security.Rule_To{{Operation: &security.Operation{Ports: []string{"5432", "notaport"}}}}}},
			}),
			ap("default", "allow-nothing", &security.AuthorizationPolicy{Selector: &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"version": "v2"}}}),
			// Not ztunnel's: a waypoint's policy and a CUSTOM action.
			ap("default", "waypoint-only", &security.AuthorizationPolicy{
				TargetRefs: []*typev1beta1.PolicyTargetReference{{Kind: "Service", Name: "reviews"}},
			}),
			ap("default", "ext-authz", &security.AuthorizationPolicy{Selector: selApp("reviews"), Action: security.AuthorizationPolicy_CUSTOM}),
			// A dry-run policy is not sent: istiod's AMBIENT_ENABLE_DRY_RUN_AUTHORIZATION_POLICY
			// is off by default, so neither the policy nor a workload's name of it appears.
			dryRun(ap("default", "dry-run-deny", &security.AuthorizationPolicy{Selector: selApp("reviews"), Action: security.AuthorizationPolicy_DENY})),
		)
	}},
	{"pa-strict", func(m *model.Model) {
		m.Istio.PeerAuthentications = append(m.Istio.PeerAuthentications,
			pa("istio-system", "default", nil, MTLSStrict, nil),
			pa("qa", "default", nil, MTLSPermissive, nil),
		)
	}},
	{"pa-port-level", func(m *model.Model) {
		m.Istio.PeerAuthentications = append(m.Istio.PeerAuthentications,
			pa("default", "default", nil, MTLSStrict, nil),
			// A PERMISSIVE port under a STRICT namespace: its own policy, merged with STRICT.
			pa("default", "db", map[string]string{"app": "db"}, security.PeerAuthentication_MutualTLS_UNSET,
				map[uint32]security.PeerAuthentication_MutualTLS_Mode{5432: MTLSPermissive}),
			// A STRICT port of a PERMISSIVE workload: a DENY of plaintext on that port.
			pa("default", "reviews", map[string]string{"app": "reviews"}, MTLSPermissive,
				map[uint32]security.PeerAuthentication_MutualTLS_Mode{9080: MTLSStrict, 9090: MTLSDisable}),
			// All ports STRICT under STRICT: the static policy covers it.
			pa("default", "productpage", map[string]string{"app": "productpage"}, MTLSStrict,
				map[uint32]security.PeerAuthentication_MutualTLS_Mode{9080: MTLSStrict}),
		)
	}},
}

func TestWDSGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range wdsCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := ambientModel()
			tc.mutate(m)
			testutil.Golden(t, "wds-"+tc.name, dumpWDS(t, m, wdsOpts))
		})
	}
}

func workloadOf(t *testing.T, m *model.Model, o WDSOptions, pod string) *workload.Workload {
	t.Helper()
	p := m.Pod(pod)
	for _, a := range Addresses(m, o) {
		if w := a.GetWorkload(); w != nil && w.Name == p.Name && w.Namespace == p.Namespace {
			return w
		}
	}
	t.Fatalf("no workload for pod %s", pod)
	return nil
}

func TestWorkloadShapeAsIstiod(t *testing.T) {
	t.Parallel()
	m := ambientModel()
	pp := workloadOf(t, m, wdsOpts, "productpage-v1")
	if got, want := pp.Uid, "Kubernetes//Pod/default/productpage-v1"; got != want {
		t.Errorf("uid = %q, want %q", got, want)
	}
	if pp.TunnelProtocol != workload.TunnelProtocol_HBONE || pp.NativeTunnel {
		t.Errorf("redirected pod: tunnel %s native %v, want HBONE, not native", pp.TunnelProtocol, pp.NativeTunnel)
	}
	// Labelled ambient but not redirected yet: istiod reads only the annotation.
	if w := workloadOf(t, m, wdsOpts, "reviews-v2"); w.TunnelProtocol != workload.TunnelProtocol_NONE {
		t.Errorf("labelled, unredirected pod: tunnel %s, want NONE", w.TunnelProtocol)
	}
	if w := workloadOf(t, m, wdsOpts, "db-v1"); w.TunnelProtocol != workload.TunnelProtocol_NONE || w.ServiceAccount != "db" {
		t.Errorf("sidecar pod: tunnel %s sa %q", w.TunnelProtocol, w.ServiceAccount)
	}
	if pp.Node != "ml-test-node" || pp.ClusterId != "Kubernetes" || pp.TrustDomain != "" || pp.Status != workload.WorkloadStatus_HEALTHY {
		t.Errorf("node %q cluster %q trust domain %q status %s", pp.Node, pp.ClusterId, pp.TrustDomain, pp.Status)
	}
	if pp.CanonicalName != "productpage" || pp.CanonicalRevision != "v1" || pp.WorkloadName != "productpage-v1" || pp.WorkloadType != workload.WorkloadType_POD {
		t.Errorf("canonical %q/%q workload %q type %s", pp.CanonicalName, pp.CanonicalRevision, pp.WorkloadName, pp.WorkloadType)
	}
	pl := pp.Services["default/productpage.default.svc.cluster.local"]
	if len(pp.Services) != 1 || pl == nil || len(pl.Ports) != 1 || pl.Ports[0].ServicePort != 9080 || pl.Ports[0].TargetPort != 9080 || pl.Ports[0].AppProtocol != workload.AppProtocol_UNKNOWN {
		t.Errorf("services = %v", pp.Services)
	}
	if got := AddressAliases(&workload.Address{Type: &workload.Address_Workload{Workload: pp}}); len(got) != 1 || got[0] != "/10.244.0.10" {
		t.Errorf("aliases = %v", got)
	}

	o := wdsOpts
	o.ClusterID = "east"
	m.Mesh.TrustDomain = "example.org"
	o.Unhealthy = func(p *model.Pod) bool { return p.Name == "productpage-v1" }
	w := workloadOf(t, m, o, "productpage-v1")
	if w.TrustDomain != "example.org" || w.Uid != "east//Pod/default/productpage-v1" || w.Status != workload.WorkloadStatus_UNHEALTHY {
		t.Errorf("trust domain %q uid %q status %s", w.TrustDomain, w.Uid, w.Status)
	}
	m.Mesh.TrustDomain = ""

	m.Pod("db-v2").Labels["networking.istio.io/tunnel"] = "foo,http"
	if w := workloadOf(t, m, wdsOpts, "db-v2"); w.TunnelProtocol != workload.TunnelProtocol_HBONE || !w.NativeTunnel {
		t.Errorf("native tunnel pod: %s native %v", w.TunnelProtocol, w.NativeTunnel)
	}
}

func TestCanonicalService(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		labels            map[string]string
		wantName, wantRev string
	}{
		{nil, "wl", "latest"},
		{map[string]string{"app": "a", "version": "v"}, "a", "v"},
		{map[string]string{"app": "a", "app.kubernetes.io/name": "k", "version": "v", "app.kubernetes.io/version": "kv"}, "k", "kv"},
		{map[string]string{"app": "a", "service.istio.io/canonical-name": "c", "service.istio.io/canonical-revision": "cr", "version": "v"}, "c", "cr"},
	} {
		if n, r := CanonicalService(tc.labels, "wl"); n != tc.wantName || r != tc.wantRev {
			t.Errorf("CanonicalService(%v) = %q, %q; want %q, %q", tc.labels, n, r, tc.wantName, tc.wantRev)
		}
	}
}

func TestKubeAppProtocolAsIstio(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		port model.ServicePort
		want workload.AppProtocol
	}{
		{model.ServicePort{Name: "http", Port: 80}, workload.AppProtocol_HTTP11},
		{model.ServicePort{Name: "http-web", Port: 80}, workload.AppProtocol_HTTP11},
		{model.ServicePort{Name: "", Port: 9080}, workload.AppProtocol_UNKNOWN}, // meshlab's HTTP guess is not istiod's
		{model.ServicePort{Name: "web", Port: 80, AppProtocol: "http2"}, workload.AppProtocol_HTTP2},
		{model.ServicePort{Name: "http", Port: 80, AppProtocol: "kubernetes.io/h2c"}, workload.AppProtocol_HTTP2},
		{model.ServicePort{Name: "grpc-web", Port: 80}, workload.AppProtocol_UNKNOWN},
		{model.ServicePort{Name: "grpc", Port: 80}, workload.AppProtocol_GRPC},
		{model.ServicePort{Name: "https", Port: 443}, workload.AppProtocol_TLS},
		{model.ServicePort{Name: "tcp-db", Port: 5432}, workload.AppProtocol_TCP},
		{model.ServicePort{Name: "", Port: 3306}, workload.AppProtocol_TCP},
		{model.ServicePort{Name: "mysql", Port: 3306}, workload.AppProtocol_UNKNOWN},
	} {
		if got := kubeAppProtocol(tc.port); got != tc.want {
			t.Errorf("kubeAppProtocol(%+v) = %s, want %s", tc.port, got, tc.want)
		}
	}
}

func TestServiceShapeAsIstiod(t *testing.T) {
	t.Parallel()
	m := ambientModel()
	m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, se("cidr", &networking.ServiceEntry{
		Hosts: []string{"range.example"}, Addresses: []string{"203.0.113.7/24"},
		Ports: []*networking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}},
	}))
	byName := map[string]*workload.Address{}
	for _, a := range Addresses(m, wdsOpts) {
		byName[AddressName(a)] = a
	}
	svc := byName["default/reviews.default.svc.cluster.local"].GetService()
	if svc == nil || !svc.Canonical || svc.IpFamilies != workload.IPFamilies_IPV4_ONLY || len(svc.Addresses) != 1 ||
		netip.AddrFrom4([4]byte(svc.Addresses[0].Address)) != netip.MustParseAddr("10.96.0.21") {
		t.Fatalf("reviews = %v", svc)
	}
	rng := byName["default/range.example"]
	if got := AddressAliases(rng); len(got) != 1 || got[0] != "/203.0.113.0/24" {
		t.Errorf("CIDR service aliases = %v", got)
	}
	if !rng.GetService().Canonical {
		t.Error("a ServiceEntry alone on its host is not canonical")
	}
}

// BenchmarkAddresses is WDS at scale: n pods, a Service per 4 pods, in 10 namespaces, and
// 1000 pods in one namespace (BenchmarkAmbientUpScale's lab has 500 Services there).
func BenchmarkAddresses(b *testing.B) {
	for _, c := range []struct {
		n, namespaces int
		name          string
	}{{100, 10, "100"}, {1000, 10, "1000"}, {1000, 1, "1000-one-namespace"}} {
		n := c.n
		var svcs []*model.Service
		var pods []*model.Pod
		for i := range n {
			ns := "ns" + strconv.Itoa(i%c.namespaces)
			app := "app" + strconv.Itoa(i/4)
			if i%4 == 0 {
				svcs = append(svcs, &model.Service{Name: app, Namespace: ns, VIP: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}),
					Selector: map[string]string{"app": app}, Ports: []model.ServicePort{{Name: "http", Port: 80, TargetPort: 8080}}})
			}
			pods = append(pods, &model.Pod{Name: "p" + strconv.Itoa(i), Namespace: ns, Workload: app, Labels: map[string]string{"app": app},
				ServiceAccount: app, IP: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)})})
		}
		m := model.New(svcs, pods)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				Addresses(m, wdsOpts)
			}
		})
	}
}

// dryRun marks a policy istio.io/dry-run "true".
func dryRun(c *model.IstioConfig[*security.AuthorizationPolicy]) *model.IstioConfig[*security.AuthorizationPolicy] {
	c.Annotations = map[string]string{model.DryRunAnnotation: "true"}
	return c
}

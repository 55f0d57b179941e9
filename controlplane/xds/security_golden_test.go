package xds

import (
	"testing"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

func pa(ns, name string, sel map[string]string, mode security.PeerAuthentication_MutualTLS_Mode, ports map[uint32]security.PeerAuthentication_MutualTLS_Mode) *model.IstioConfig[*security.PeerAuthentication] {
	spec := &security.PeerAuthentication{Mtls: &security.PeerAuthentication_MutualTLS{Mode: mode}}
	if sel != nil {
		spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: sel}
	}
	for p, m := range ports {
		if spec.PortLevelMtls == nil {
			spec.PortLevelMtls = map[uint32]*security.PeerAuthentication_MutualTLS{}
		}
		spec.PortLevelMtls[p] = &security.PeerAuthentication_MutualTLS{Mode: m}
	}
	return &model.IstioConfig[*security.PeerAuthentication]{Name: name, Namespace: ns, Spec: spec}
}

func ap(ns, name string, spec *security.AuthorizationPolicy) *model.IstioConfig[*security.AuthorizationPolicy] {
	return &model.IstioConfig[*security.AuthorizationPolicy]{Name: name, Namespace: ns, Spec: spec}
}

func selApp(app string) *typev1beta1.WorkloadSelector {
	return &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": app}}
}

// securityCases are the mTLS and authorization features, one golden file each
// (testdata/istio-<name>.golden, the config of pod's proxy).
var securityCases = []struct {
	name, pod string
	mutate    func(*model.Model)
}{
	{"pa-strict", "reviews-v1", func(m *model.Model) {
		m.Istio.PeerAuthentications = append(m.Istio.PeerAuthentications,
			pa("istio-system", "default", nil, MTLSStrict, nil))
		m.Pod("db-v2").Sidecar.Inject = false // a pod without a sidecar gets no tlsMode
	}},
	{"pa-port-level", "db-v1", func(m *model.Model) {
		m.Istio.PeerAuthentications = append(m.Istio.PeerAuthentications,
			pa("default", "default", nil, MTLSStrict, nil),
			pa("default", "db", map[string]string{"app": "db"}, security.PeerAuthentication_MutualTLS_UNSET,
				map[uint32]security.PeerAuthentication_MutualTLS_Mode{5432: MTLSDisable}),
		)
	}},
	{"dr-tls", "productpage-v1", func(m *model.Model) {
		m.Istio.DestinationRules = append(m.Istio.DestinationRules, dr("reviews", &networking.DestinationRule{
			Host:          "reviews",
			TrafficPolicy: &networking.TrafficPolicy{Tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_ISTIO_MUTUAL}},
			Subsets: []*networking.Subset{
				{Name: "v1", Labels: map[string]string{"version": "v1"}},
				{Name: "v2", Labels: map[string]string{"version": "v2"},
					TrafficPolicy: &networking.TrafficPolicy{Tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_DISABLE}}},
			},
		}), dr("db", &networking.DestinationRule{
			Host: "db",
			TrafficPolicy: &networking.TrafficPolicy{PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{
				Port: &networking.PortSelector{Number: 5432},
				Tls:  &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_DISABLE},
			}}},
		}))
	}},
	{"sidecar-ingress-tls", "reviews-v1", func(m *model.Model) {
		// The sidecar TLS termination task: ENABLE_TLS_ON_SIDECAR_INGRESS on, a Sidecar
		// with an HTTPS port terminating MUTUAL TLS from certificate files (its port's
		// mTLS DISABLE) to the pod's IP, and an HTTP port to 127.0.0.1 under STRICT.
		m.Mesh.TLSOnSidecarIngress = true
		m.Istio.PeerAuthentications = append(m.Istio.PeerAuthentications,
			pa("default", "default", nil, MTLSStrict, nil),
			pa("default", "reviews", map[string]string{"app": "reviews"}, MTLSStrict,
				map[uint32]security.PeerAuthentication_MutualTLS_Mode{9080: MTLSDisable}))
		m.Istio.Sidecars = append(m.Istio.Sidecars, &model.IstioConfig[*networking.Sidecar]{Name: "ingress-sidecar", Namespace: "default", Spec: &networking.Sidecar{
			WorkloadSelector: &networking.WorkloadSelector{Labels: map[string]string{"app": "reviews", "version": "v1"}},
			Ingress: []*networking.IstioIngressListener{{
				Port:            &networking.SidecarPort{Number: 9080, Protocol: "HTTPS", Name: "external"},
				DefaultEndpoint: "0.0.0.0:80",
				Tls: &networking.ServerTLSSettings{
					Mode: networking.ServerTLSSettings_MUTUAL, PrivateKey: "/etc/istio/tls-certs/tls.key",
					ServerCertificate: "/etc/istio/tls-certs/tls.crt", CaCertificates: "/etc/istio/tls-ca-certs/ca.crt",
				},
			}, {
				Port:            &networking.SidecarPort{Number: 9081, Protocol: "HTTP", Name: "internal"},
				DefaultEndpoint: "127.0.0.1:80",
			}},
		}})
	}},
	{"authz-allow-principal", "reviews-v1", func(m *model.Model) {
		m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies, ap("default", "reviews-viewer", &security.AuthorizationPolicy{
			Selector: selApp("reviews"),
			Rules: []*security.Rule{{From: []*security.Rule_From{{Source: &security.Source{
				Principals: []string{"cluster.local/ns/default/sa/productpage", "cluster.local/ns/qa/*"},
			}}}}},
		}))
	}},
	// The trust domain migration task's mesh: new-td with the alias old-td; a policy naming
	// old-td and one naming cluster.local (both rewritten to new-td and old-td, as istiod's
	// trust domain bundle), one naming another trust domain (kept); the inbound chains
	// accept peers of both trust domains, and the outbound clusters' SANs name both.
	{"authz-trust-domain-aliases", "reviews-v1", func(m *model.Model) {
		m.Mesh.TrustDomain, m.Mesh.TrustDomainAliases = "new-td", []string{"old-td"}
		m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies, ap("default", "reviews-viewer", &security.AuthorizationPolicy{
			Selector: selApp("reviews"),
			Rules: []*security.Rule{{From: []*security.Rule_From{{Source: &security.Source{
				Principals:    []string{"old-td/ns/default/sa/productpage", "cluster.local/ns/qa/sa/tester", "other-td/ns/default/sa/x"},
				NotPrincipals: []string{"old-td/ns/default/sa/blocked"},
			}}}}},
		}))
	}},
	{"authz-deny-path-method", "reviews-v1", func(m *model.Model) {
		m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies, ap("default", "no-admin", &security.AuthorizationPolicy{
			Action: security.AuthorizationPolicy_DENY,
			Rules: []*security.Rule{{To: []*security.Rule_To{{Operation: &security.Operation{
				Methods: []string{"POST", "DELETE"}, Paths: []string{"/admin*", "*.php", "/exact"}, NotPaths: []string{"/admin/health"},
			}}}}},
		}))
	}},
	// The authz-dry-run page's policy (istio.io/dry-run "true" on a DENY of /headers)
	// beside an enforced ALLOW: the DENY filter has shadow rules only (prefix
	// istio_dry_run_deny_), the ALLOW filter its rules (prefix istio_dry_run_allow_).
	{"authz-dry-run", "reviews-v1", func(m *model.Model) {
		dry := ap("default", "deny-path-headers", &security.AuthorizationPolicy{
			Selector: selApp("reviews"), Action: security.AuthorizationPolicy_DENY,
			Rules: []*security.Rule{{To: []*security.Rule_To{{Operation: &security.Operation{Paths: []string{"/headers"}}}}}},
		})
		dry.Annotations = map[string]string{model.DryRunAnnotation: "true"}
		off := ap("default", "dry-run-false", &security.AuthorizationPolicy{
			Selector: selApp("reviews"), Action: security.AuthorizationPolicy_DENY,
			Rules: []*security.Rule{{To: []*security.Rule_To{{Operation: &security.Operation{Paths: []string{"/admin"}}}}}},
		})
		off.Annotations = map[string]string{model.DryRunAnnotation: "false"}
		m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies, dry, off, ap("default", "reviews-viewer", &security.AuthorizationPolicy{
			Selector: selApp("reviews"),
			Rules:    []*security.Rule{{From: []*security.Rule_From{{Source: &security.Source{Namespaces: []string{"default"}}}}}},
		}))
	}},
	// A dry-run ALLOW on a TCP port: the network filter carries shadow rules only.
	{"authz-dry-run-tcp", "db-v1", func(m *model.Model) {
		dry := ap("default", "db-only-5432", &security.AuthorizationPolicy{
			Selector: selApp("db"),
			Rules:    []*security.Rule{{To: []*security.Rule_To{{Operation: &security.Operation{Ports: []string{"5432"}}}}}},
		})
		dry.Annotations = map[string]string{model.DryRunAnnotation: "true"}
		m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies, dry)
	}},
	{"authz-namespaces", "reviews-v1", func(m *model.Model) {
		m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies, ap("default", "same-ns", &security.AuthorizationPolicy{
			Rules: []*security.Rule{{From: []*security.Rule_From{
				{Source: &security.Source{Namespaces: []string{"default"}}},
				{Source: &security.Source{Principals: []string{"*"}, NotNamespaces: []string{"qa"}}},
			}}},
		}))
	}},
	{"authz-when-header", "reviews-v1", func(m *model.Model) {
		m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies, ap("default", "header", &security.AuthorizationPolicy{
			Selector: selApp("reviews"),
			Rules: []*security.Rule{{
				To:   []*security.Rule_To{{Operation: &security.Operation{Methods: []string{"GET"}}}},
				When: []*security.Condition{{Key: "request.headers[x-token]", Values: []string{"secret", "admin-*"}, NotValues: []string{"revoked"}}},
			}},
		}))
	}},
	{"authz-allow-nothing", "reviews-v1", func(m *model.Model) {
		m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies,
			ap("istio-system", "allow-nothing", &security.AuthorizationPolicy{}))
	}},
	{"authz-tcp-port", "db-v1", func(m *model.Model) {
		m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies,
			ap("default", "db-allow", &security.AuthorizationPolicy{
				Selector: selApp("db"),
				Rules: []*security.Rule{
					{To: []*security.Rule_To{{Operation: &security.Operation{Ports: []string{"5432"}}}}},
					// HTTP-only: dropped from an ALLOW policy on a TCP chain.
					{To: []*security.Rule_To{{Operation: &security.Operation{Methods: []string{"GET"}}}}},
				},
			}),
			ap("default", "db-deny", &security.AuthorizationPolicy{
				Selector: selApp("db"), Action: security.AuthorizationPolicy_DENY,
				// On TCP keeps only its TCP part: deny qa on 5432.
				Rules: []*security.Rule{{
					From: []*security.Rule_From{{Source: &security.Source{Namespaces: []string{"qa"}}}},
					To:   []*security.Rule_To{{Operation: &security.Operation{Ports: []string{"5432"}, Paths: []string{"/x"}}}},
				}},
			}),
		)
	}},
}

func TestGenerateSecurityGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range securityCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := istioModel()
			tc.mutate(m)
			anys := 0
			for _, pod := range m.Pods {
				if !pod.Sidecar.Inject {
					continue
				}
				res, err := Generate(m, pod)
				if err != nil {
					t.Fatalf("Generate(%s): %v", pod.Name, err)
				}
				for typ, rs := range res {
					for _, r := range rs {
						anys += validateDeep(t, pod.Name+":"+typ+"/"+cachev3.GetResourceName(r), r)
					}
				}
			}
			if anys == 0 {
				t.Fatal("no typed config was validated")
			}
			testutil.Golden(t, "istio-"+tc.name, dumpJSON(t, generate(t, m, tc.pod)))
		})
	}
}

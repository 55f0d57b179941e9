package lab

import (
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

const mtlsBase = `apiVersion: v1
kind: Service
metadata: {name: backend}
spec:
  selector: {app: backend}
  ports: [{name: http, port: 8080}, {name: tcp-db, port: 9000, targetPort: 9001}]
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: backend-v1}
spec: {labels: {app: backend, version: v1}, ports: [8080, 9001], app: {}}
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: backend-v2}
spec: {labels: {app: backend, version: v2}, ports: [8080, 9001], app: {}}
`

func peerAuthn(ns, name, spec string) string {
	return "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec: " + spec + "\n"
}

func buildModel(t *testing.T, yaml string) *model.Model {
	t.Helper()
	s, err := config.Load("t.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	m, err := s.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/24"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/24")})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return m
}

// proxyMode reads the mode a pod's proxy enforces on port from its generated
// virtualInbound chains: mTLS only is STRICT, plaintext only DISABLE, both PERMISSIVE.
func proxyMode(t *testing.T, chains []*listener.FilterChain, port uint32) string {
	t.Helper()
	var transports []string
	for _, fc := range chains {
		if m := fc.GetFilterChainMatch(); m.GetDestinationPort().GetValue() == port && !slices.Contains(transports, m.GetTransportProtocol()) {
			transports = append(transports, m.GetTransportProtocol())
		}
	}
	switch {
	case slices.Equal(transports, []string{"tls"}):
		return "STRICT"
	case slices.Equal(transports, []string{"raw_buffer"}):
		return "DISABLE"
	case slices.Contains(transports, "tls") && slices.Contains(transports, "raw_buffer"):
		return "PERMISSIVE"
	}
	t.Fatalf("chains of port %d have transports %q", port, transports)
	return ""
}

// describe service and the proxies agree on every mTLS mode: the mode the lab's answer
// shows for each port is the one the generated inbound chains of every selected pod
// enforce.
func TestDescribeServiceMTLSAgreesWithProxy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		objs string
	}{
		{name: "no policy"},
		{name: "mesh STRICT", objs: peerAuthn("istio-system", "default", "{mtls: {mode: STRICT}}")},
		{name: "namespace over mesh", objs: peerAuthn("istio-system", "default", "{mtls: {mode: STRICT}}") + peerAuthn("default", "ns", "{mtls: {mode: DISABLE}}")},
		{name: "workload over namespace", objs: peerAuthn("default", "ns", "{mtls: {mode: DISABLE}}") + peerAuthn("default", "be", "{selector: {matchLabels: {app: backend}}, mtls: {mode: STRICT}}")},
		{name: "port level on the target port", objs: peerAuthn("default", "be", "{selector: {matchLabels: {app: backend}}, mtls: {mode: STRICT}, portLevelMtls: {9001: {mode: DISABLE}}}")},
		{name: "UNSET inherits", objs: peerAuthn("istio-system", "default", "{mtls: {mode: STRICT}}") + peerAuthn("default", "be", "{selector: {matchLabels: {app: backend}}, mtls: {mode: UNSET}, portLevelMtls: {9001: {mode: PERMISSIVE}}}")},
		{name: "one version only", objs: peerAuthn("default", "v2", "{selector: {matchLabels: {version: v2}}, mtls: {mode: STRICT}}")},
		{name: "custom root namespace", objs: "---\napiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: mesh}\nspec: {rootNamespace: mesh}\n" +
			peerAuthn("mesh", "default", "{mtls: {mode: STRICT}}") + peerAuthn("istio-system", "default", "{mtls: {mode: DISABLE}}")},
		{name: "selector in the root namespace is not mesh-wide", objs: peerAuthn("istio-system", "be", "{selector: {matchLabels: {app: backend}}, mtls: {mode: DISABLE}}")},
		{name: "tie: first by name", objs: peerAuthn("default", "b", "{mtls: {mode: STRICT}}") + peerAuthn("default", "a", "{mtls: {mode: DISABLE}}")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := buildModel(t, mtlsBase+tc.objs)
			v, err := describeService(m, "", "backend")
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Ports) != 2 {
				t.Fatalf("ports = %+v, want http and tcp-db", v.Ports)
			}
			for _, port := range v.Ports {
				byMode := map[string][]string{}
				var modes []string
				for _, p := range m.Pods {
					res, err := xds.Generate(m, p)
					if err != nil {
						t.Fatal(err)
					}
					var chains []*listener.FilterChain
					for _, r := range res[resource.ListenerType] {
						if l := r.(*listener.Listener); l.GetName() == xds.VirtualInboundListener {
							chains = l.GetFilterChains()
						}
					}
					mode := proxyMode(t, chains, uint32(port.TargetPort))
					if byMode[mode] == nil {
						modes = append(modes, mode)
					}
					byMode[mode] = append(byMode[mode], p.Name)
				}
				want := modes[0]
				if len(modes) > 1 {
					var parts []string
					for _, mode := range modes {
						parts = append(parts, mode+" ("+strings.Join(byMode[mode], ", ")+")")
					}
					want = strings.Join(parts, "; ")
				}
				if port.MTLS != want {
					t.Errorf("port %s: describe shows %q, the proxies enforce %q", port.Name, port.MTLS, want)
				}
			}
		})
	}
}

// The view lists what serves the service and every Istio object that applies to it,
// and only those.
func TestDescribeServiceView(t *testing.T) {
	t.Parallel()
	m := buildModel(t, mtlsBase+`---
apiVersion: v1
kind: Service
metadata: {name: frontend}
spec:
  selector: {app: frontend}
  ports: [{name: http, port: 8080}]
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: frontend}
spec: {labels: {app: frontend}, ports: [8080], app: {}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: backend}
spec: {hosts: [backend], http: [{route: [{destination: {host: backend, subset: v1}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: canary}
spec: {hosts: [frontend.default], http: [{route: [{destination: {host: backend.default.svc.cluster.local}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: front}
spec: {hosts: [frontend], http: [{route: [{destination: {host: frontend}}]}]}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: backend}
spec: {host: backend.default.svc.cluster.local, subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: front}
spec: {host: frontend}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-frontend}
spec: {selector: {matchLabels: {app: backend}}, action: ALLOW, rules: [{}]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: front-only}
spec: {selector: {matchLabels: {app: frontend}}, action: DENY, rules: [{}]}
`+peerAuthn("default", "default", "{mtls: {mode: STRICT}}")+peerAuthn("default", "front", "{selector: {matchLabels: {app: frontend}}, mtls: {mode: DISABLE}}"))
	v, err := describeService(m, "default", "backend")
	if err != nil {
		t.Fatal(err)
	}
	if v.Hostname != "backend.default.svc.cluster.local" || !strings.HasPrefix(v.VIP, "10.96.0.") {
		t.Errorf("hostname %q, VIP %q", v.Hostname, v.VIP)
	}
	var pods []string
	for _, p := range v.Pods {
		pods = append(pods, p.Name)
	}
	want := api.ServiceView{
		VirtualServices:       []string{"default/backend", "default/canary"},
		DestinationRules:      map[string][]string{"default/backend": {"v1", "v2"}},
		PeerAuthentications:   []string{"default/default"},
		AuthorizationPolicies: []string{"default/allow-frontend (ALLOW)"},
	}
	got := api.ServiceView{VirtualServices: v.VirtualServices, DestinationRules: v.DestinationRules, PeerAuthentications: v.PeerAuthentications, AuthorizationPolicies: v.AuthorizationPolicies}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("objects:\n got %+v\nwant %+v", got, want)
	}
	if !slices.Equal(pods, []string{"backend-v1", "backend-v2"}) {
		t.Errorf("pods = %q", pods)
	}
	wantPorts := []api.ServicePortView{
		{Name: "http", Port: 8080, TargetPort: 8080, Protocol: "HTTP", MTLS: "STRICT"},
		{Name: "tcp-db", Port: 9000, TargetPort: 9001, Protocol: "TCP", MTLS: "STRICT"},
	}
	if !reflect.DeepEqual(v.Ports, wantPorts) {
		t.Errorf("ports:\n got %+v\nwant %+v", v.Ports, wantPorts)
	}

	_, err = describeService(m, "", "nope")
	if !errors.Is(err, api.ErrNotFound) || !strings.Contains(err.Error(), "services: backend, frontend") {
		t.Errorf("unknown service: err = %v, want ErrNotFound listing the services", err)
	}
	if _, err := describeService(m, "other", "backend"); !errors.Is(err, api.ErrUnknownService) {
		t.Errorf("service in another namespace: err = %v, want ErrUnknownService", err)
	}
}

func TestClusterHealth(t *testing.T) {
	t.Parallel()
	got := clusterHealth("outbound|8080||backend.default.svc.cluster.local::10.244.0.3:8080::health_flags::healthy\n"+
		"outbound|8080||backend.default.svc.cluster.local::10.244.0.3:8080::weight::1\n"+
		"outbound|8080||other.default.svc.cluster.local::10.244.0.9:8080::health_flags::healthy\n"+
		"inbound|8080||backend.default.svc.cluster.local::10.244.0.3:8080::health_flags::healthy\n", "backend.default.svc.cluster.local")
	want := []api.EndpointView{{Cluster: "outbound|8080||backend.default.svc.cluster.local", Address: "10.244.0.3:8080", Health: "healthy"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

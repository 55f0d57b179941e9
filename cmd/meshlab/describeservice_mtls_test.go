package main

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/config"
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

// describe service and the proxies agree on every mTLS mode: the mode describe shows for
// each port is the one the generated inbound chains of every selected pod enforce.
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
			s, err := config.Load("t.yaml", []byte(mtlsBase+tc.objs))
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			m, err := s.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/24"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/24")})
			if err != nil {
				t.Fatalf("build: %v", err)
			}
			var objs []api.ConfigObject
			for _, o := range s.Objects {
				objs = append(objs, api.ConfigObject{Kind: o.Origin.Kind, Namespace: o.Origin.Namespace, Name: o.Origin.Name, File: o.Origin.File, Object: o.JSON})
			}
			var pods []api.PodStatus
			for _, p := range m.Pods {
				pods = append(pods, api.PodStatus{Name: p.Name, Namespace: p.Namespace, IP: p.IP})
			}
			v, err := buildServiceView(objs, pods, "backend")
			if err != nil {
				t.Fatal(err)
			}
			for _, port := range v.Ports {
				target := map[string]uint32{"http": 8080, "tcp-db": 9001}[port.Name]
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
					mode := proxyMode(t, chains, target)
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

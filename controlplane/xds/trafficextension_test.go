package xds

import (
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// luaExtension is a TrafficExtension named name in istio-ingress or default (ns) with
// spec's targetRefs, phase, priority and match (YAML lines at spec's indentation).
func luaExtension(name, ns, spec string) string {
	return "---\napiVersion: extensions.istio.io/v1alpha1\nkind: TrafficExtension\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n" + spec +
		"  lua:\n    inlineCode: |\n      function envoy_on_request(h) h:headers():add(\"x-" + name + "\", \"1\") end\n"
}

// chainFilterNames are the HTTP filter names of every HCM of chain fc.
func chainFilterNames(t *testing.T, fc *listener.FilterChain) []string {
	t.Helper()
	var out []string
	for _, f := range chainHCM(t, fc).GetHttpFilters() {
		out = append(out, f.GetName())
	}
	return out
}

// TestTrafficExtensionOnGateway: a TrafficExtension targeting a Gateway API gateway puts
// its Lua filter (named extensions.istio.io/trafficextension/<ns>.<name>) in the
// gateway's HTTP chain on a matching port, by phase and priority around the RBAC filter
// of an AuthorizationPolicy on the same gateway; one for SERVER mode (a gateway's chains
// are CLIENT), another port or another Gateway is left out. The listener is held by a
// golden file.
func TestTrafficExtensionOnGateway(t *testing.T) {
	t.Parallel()
	target := "  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: httpbin-gateway}]\n"
	yaml := gatewayAPIScenario +
		luaExtension("stats", "istio-ingress", target+"  phase: STATS\n") +
		luaExtension("stats-first", "istio-ingress", target+"  phase: STATS\n  priority: 10\n") +
		luaExtension("authz", "istio-ingress", target+"  phase: AUTHZ\n") +
		luaExtension("authn", "istio-ingress", target+"  phase: AUTHN\n") +
		luaExtension("unspecified", "istio-ingress", target) +
		luaExtension("server-only", "istio-ingress", target+"  match: [{mode: SERVER}]\n") +
		luaExtension("other-port", "istio-ingress", target+"  match: [{ports: [{number: 8080}]}]\n") +
		luaExtension("port-80", "istio-ingress", target+"  match: [{mode: CLIENT, ports: [{number: 80}]}]\n") +
		luaExtension("other-gateway", "istio-ingress", "  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: other}]\n") +
		`---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-delete, namespace: istio-ingress}
spec:
  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: httpbin-gateway}]
  action: DENY
  rules: [{to: [{operation: {methods: [DELETE]}}]}]
`
	s, err := config.Load("gateway-lua.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(m.Pods, func(p *model.Pod) bool { return p.Router })
	if i < 0 {
		t.Fatal("no router pod for the Gateway")
	}
	res := generateGateway(t, m, m.Pods[i].Name)
	testutil.Golden(t, "gatewayapi-lua", dumpJSON(t, res))
	l := res[resource.ListenerType][0].(*listener.Listener)
	const p = TrafficExtensionResourcePrefix + "istio-ingress."
	want := []string{p + "authn", p + "authz", "envoy.filters.http.rbac", p + "stats-first", p + "stats", p + "port-80", p + "unspecified"}
	got := chainFilterNames(t, l.GetFilterChains()[0])
	got = slices.DeleteFunc(got, func(n string) bool {
		return !strings.HasPrefix(n, TrafficExtensionResourcePrefix) && n != "envoy.filters.http.rbac"
	})
	if !slices.Equal(got, want) {
		t.Errorf("gateway HTTP filters (extensions and rbac):\n%q\nwant\n%q", got, want)
	}
}

// TestTrafficExtensionOnWaypoint: on a waypoint, a TrafficExtension targeting the
// waypoint's Gateway is in every service chain and the chain of no service; one
// targeting a Service (SERVER mode, the page's parity-for-reviews) only in that
// Service's chains; one for CLIENT mode in none.
func TestTrafficExtensionOnWaypoint(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../fidelity/testdata/waypoint/ambient-waypoint-l7.yaml")
	if err != nil {
		t.Fatal(err)
	}
	yaml := string(data) +
		luaExtension("parity-at-waypoint", "default", "  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: waypoint}]\n  phase: STATS\n") +
		luaExtension("parity-for-reviews", "default", "  targetRefs: [{kind: Service, group: \"\", name: reviews}]\n  match: [{mode: SERVER}]\n  phase: STATS\n") +
		luaExtension("client-only", "default", "  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: waypoint}]\n  match: [{mode: CLIENT}]\n")
	m := buildWaypointModel(t, "waypoint-lua.yaml", []byte(yaml))
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
	const p = TrafficExtensionResourcePrefix + "default."
	seen := 0
	for _, r := range res[resource.ListenerType] {
		l := r.(*listener.Listener)
		if l.GetName() != MainInternalListener {
			continue
		}
		for _, fc := range l.GetFilterChains() {
			if !slices.ContainsFunc(fc.GetFilters(), func(f *listener.Filter) bool { return f.GetName() == wellknown.HTTPConnectionManager }) {
				continue
			}
			seen++
			got := slices.DeleteFunc(chainFilterNames(t, fc), func(n string) bool { return !strings.HasPrefix(n, TrafficExtensionResourcePrefix) })
			want := []string{p + "parity-at-waypoint"}
			if strings.Contains(fc.GetName(), "|reviews.default.svc.cluster.local") {
				want = append(want, p+"parity-for-reviews")
			}
			if !slices.Equal(got, want) {
				t.Errorf("chain %s: extensions %q, want %q", fc.GetName(), got, want)
			}
		}
	}
	if seen < 3 {
		t.Errorf("%d HTTP chains in main_internal, want the services' and the direct one", seen)
	}
}

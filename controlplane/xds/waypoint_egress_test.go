package xds

import (
	"slices"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/internal/testutil"
)

// egressWaypointScenario is istio.io's ambient egress page: a waypoint for services in
// istio-egress, the namespace enrolled, a ServiceEntry for httpbin.org (resolution DNS,
// HTTP on 80 to 443), its SIMPLE DestinationRule and an AuthorizationPolicy targeting it.
const egressWaypointScenario = `apiVersion: v1
kind: Namespace
metadata:
  name: istio-egress
  labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: waypoint
  namespace: istio-egress
  labels: {istio.io/waypoint-for: service}
spec:
  gatewayClassName: istio-waypoint
  listeners:
  - {name: mesh, port: 15008, protocol: HBONE}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: httpbin-org, namespace: istio-egress}
spec:
  hosts: [httpbin.org]
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 443}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: httpbin-org-tls, namespace: istio-egress}
spec:
  host: httpbin.org
  trafficPolicy: {tls: {mode: SIMPLE}}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: httpbin-org, namespace: istio-egress}
spec:
  targetRefs: [{kind: ServiceEntry, group: networking.istio.io, name: httpbin-org}]
  action: ALLOW
  rules: [{to: [{operation: {methods: [GET], paths: [/get]}}]}]
`

// TestWaypointEgressServiceEntry: the egress waypoint serves the ServiceEntry's host on
// its autoallocated address: a main_internal chain inbound-vip|80|http|httpbin.org with
// the policy's RBAC filter, and a STRICT_DNS cluster of that name to httpbin.org:443
// originating TLS; no EDS for it. The resources are held by a golden file.
func TestWaypointEgressServiceEntry(t *testing.T) {
	t.Parallel()
	m := buildWaypointModel(t, "egress.yaml", []byte(egressWaypointScenario))
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
	testutil.Golden(t, "waypoint-egress", dumpJSON(t, res))
	const name = "inbound-vip|80|http|httpbin.org"
	var c *cluster.Cluster
	for _, r := range res[resource.ClusterType] {
		if r.(*cluster.Cluster).GetName() == name {
			c = r.(*cluster.Cluster)
		}
	}
	if c == nil || c.GetType() != cluster.Cluster_STRICT_DNS || c.GetTransportSocket().GetName() != "envoy.transport_sockets.tls" {
		t.Fatalf("cluster %s: %v, want STRICT_DNS originating TLS", name, c)
	}
	sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if sa.GetAddress() != "httpbin.org" || sa.GetPortValue() != 443 {
		t.Errorf("cluster %s resolves %s:%d, want httpbin.org:443", name, sa.GetAddress(), sa.GetPortValue())
	}
	for _, r := range res[resource.EndpointType] {
		if cachev3.GetResourceName(r) == name {
			t.Errorf("EDS for %s: its STRICT_DNS cluster carries its endpoints", name)
		}
	}
	var chain *listener.FilterChain
	for _, r := range res[resource.ListenerType] {
		if l := r.(*listener.Listener); l.GetName() == MainInternalListener {
			for _, fc := range l.GetFilterChains() {
				if fc.GetName() == name {
					chain = fc
				}
			}
		}
	}
	if chain == nil {
		t.Fatalf("main_internal has no chain %s", name)
	}
	if !slices.Contains(chainFilterNames(t, chain), "envoy.filters.http.rbac") {
		t.Errorf("chain %s: filters %q, want the ServiceEntry's policy's RBAC", name, chainFilterNames(t, chain))
	}
}

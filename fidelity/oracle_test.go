package fidelity

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
)

// TestOracleSeesTheLab checks the conversion of a scenario into istiod's inputs: istiod
// finds the sidecar's services (it builds the pod's inbound cluster; istiod finds them by
// the proxy's IP, else by its labels), knows every Service (an outbound cluster each) and
// its endpoints are the selected pods, from the EndpointSlices.
func TestOracleSeesTheLab(t *testing.T) {
	skipInAmbientMode(t)
	sc, err := loadScenario(filepath.Join("..", "scenarios", "hello.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := sc.Build(buildOptions)
	if err != nil {
		t.Fatal(err)
	}
	o, err := startOracle(t, m)
	if err != nil {
		t.Fatal(err)
	}
	pods := sidecarPods(m)
	if len(pods) == 0 {
		t.Fatal("hello has no sidecar pod")
	}
	p := pods[0]
	got, err := collectIstiod(context.Background(), o.addr, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range p.Ports {
		if name := "inbound|" + itoa(port) + "||"; got[clusterType][name] == nil {
			t.Errorf("istiod found no service of %s: no cluster %s (have %v)", nodeID(p), name, keys(got[clusterType]))
		}
	}
	for _, s := range m.Services {
		for _, sp := range s.Ports {
			name := "outbound|" + itoa(sp.Port) + "||" + s.Hostname()
			if got[clusterType][name] == nil {
				t.Errorf("istiod has no cluster %s (have %v)", name, keys(got[clusterType]))
				continue
			}
			cla, _ := got[endpointType][name].(*endpointv3.ClusterLoadAssignment)
			var ips []netip.Addr
			for _, le := range cla.GetEndpoints() {
				for _, lb := range le.GetLbEndpoints() {
					a, err := netip.ParseAddr(lb.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
					if err == nil {
						ips = append(ips, a)
					}
				}
			}
			want := m.Endpoints(s, sp)
			if len(ips) != len(want) {
				t.Errorf("%s: istiod's endpoints %v, want the %d pods %v", name, ips, len(want), want)
			}
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

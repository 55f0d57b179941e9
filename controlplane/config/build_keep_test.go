package config

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/scenarios"
)

// keepScenario is a scenario of the given Services and Deployments (name:replicas), each
// Deployment app=<name>, in namespace default unless the name says "ns/name".
func keepScenario(t *testing.T, services []string, deployments map[string]int) *Scenario {
	t.Helper()
	var b strings.Builder
	split := func(s string) (string, string) {
		if ns, n, ok := strings.Cut(s, "/"); ok {
			return ns, n
		}
		return "default", s
	}
	for _, s := range services {
		ns, n := split(s)
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: %s}\nspec:\n  selector: {app: %s}\n  ports: [{name: http, port: 8000}]\n", n, ns, n)
	}
	for d, replicas := range deployments {
		ns, n := split(d)
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: %s, namespace: %s}
spec:
  replicas: %d
  selector: {matchLabels: {app: %s}}
  template:
    metadata: {labels: {app: %s}}
    spec:
      containers: [{name: app, image: docker.io/kennethreitz/httpbin, ports: [{containerPort: 80}]}]
`, n, ns, replicas, n, n)
	}
	s, err := Load("keep.yaml", []byte(b.String()))
	if err != nil {
		t.Fatalf("Load: %v\n%s", err, b.String())
	}
	return s
}

func buildKeep(t *testing.T, s *Scenario, prev *model.Model) *model.Model {
	t.Helper()
	o := defaultOpts
	if prev != nil {
		o.Keep = AllocationsOf(prev)
	}
	m, err := s.Build(o)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return m
}

// addrsByKey maps "pod ns/name" and "svc host" to their address.
func addrsByKey(m *model.Model) map[string]netip.Addr {
	out := map[string]netip.Addr{}
	for _, p := range m.Pods {
		out["pod "+p.Namespace+"/"+p.Name] = p.IP
	}
	for _, s := range m.Services {
		out["svc "+s.Hostname()] = s.VIP
	}
	return out
}

// Rebuilding a scenario with its own allocations kept changes no address: a running lab
// that applies what it runs keeps every pod and VIP.
func TestBuildKeepSameScenario(t *testing.T) {
	t.Parallel()
	for _, name := range scenarios.Names() {
		data, file, err := scenarios.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Load(file, data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fresh := buildKeep(t, s, nil)
		again := buildKeep(t, s, fresh)
		if got, want := addrsByKey(again), addrsByKey(fresh); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: kept addresses moved:\n got %v\nwant %v", name, got, want)
		}
	}
}

// New pods and Services sorting before the running ones (which renumbered the running
// ones before sticky allocation) take free addresses; the running ones stay.
func TestBuildKeepAddsWithoutRenumbering(t *testing.T) {
	t.Parallel()
	cur := buildKeep(t, keepScenario(t, []string{"sleep"}, map[string]int{"sleep": 1}), nil)
	before := addrsByKey(cur)
	if got := cur.Pods[0].IP; got != netip.MustParseAddr("10.244.0.2") {
		t.Fatalf("fresh pod IP = %s, want 10.244.0.2 (a fresh build is unchanged)", got)
	}
	if got := cur.Services[0].VIP; got != netip.MustParseAddr("10.96.0.10") {
		t.Fatalf("fresh VIP = %s, want 10.96.0.10", got)
	}
	// "httpbin" and "aaa/x" sort before "sleep": in model order they come first.
	next := buildKeep(t, keepScenario(t, []string{"aaa/x", "httpbin", "sleep"}, map[string]int{"aaa/x": 1, "httpbin": 2, "sleep": 1}), cur)
	got := addrsByKey(next)
	for k, a := range before {
		if got[k] != a {
			t.Errorf("%s moved from %s to %s", k, a, got[k])
		}
	}
	var newPods, newVIPs []string
	for k, a := range got {
		if _, ok := before[k]; ok {
			continue
		}
		if strings.HasPrefix(k, "pod ") {
			newPods = append(newPods, a.String())
		} else {
			newVIPs = append(newVIPs, a.String())
		}
	}
	if !sameSet(newPods, []string{"10.244.0.3", "10.244.0.4", "10.244.0.5"}) {
		t.Errorf("new pods got %v, want the lowest free 10.244.0.3-5", newPods)
	}
	if !sameSet(newVIPs, []string{"10.96.0.11", "10.96.0.12"}) {
		t.Errorf("new Services got %v, want the lowest free 10.96.0.11-12", newVIPs)
	}
	// New addresses follow model order among themselves: aaa/x first.
	for _, p := range next.Pods {
		if p.Namespace == "aaa" && p.IP != netip.MustParseAddr("10.244.0.3") {
			t.Errorf("aaa/%s = %s, want 10.244.0.3 (first new pod in model order)", p.Name, p.IP)
		}
	}
}

// A removed pod's or Service's address is not given out in the same change (its pod may
// still be draining), but is free in the next one.
func TestBuildKeepReusesFreedAddressLater(t *testing.T) {
	t.Parallel()
	cur := buildKeep(t, keepScenario(t, []string{"a", "b", "c"}, map[string]int{"a": 1, "b": 1, "c": 1}), nil)
	b := addrsByKey(cur)
	var bPod string
	for k := range b {
		if strings.HasPrefix(k, "pod default/b-") {
			bPod = k
		}
	}
	// b goes, d comes: d may not take b's addresses yet.
	mid := buildKeep(t, keepScenario(t, []string{"a", "c", "d"}, map[string]int{"a": 1, "c": 1, "d": 1}), cur)
	for k, a := range addrsByKey(mid) {
		if strings.Contains(k, "/d-") || strings.HasPrefix(k, "svc d.") {
			if a == b[bPod] || a == b["svc b.default.svc.cluster.local"] {
				t.Errorf("%s took %s, the address of b removed in the same change", k, a)
			}
		}
	}
	if got := addrsByKey(mid)["svc d.default.svc.cluster.local"]; got != netip.MustParseAddr("10.96.0.13") {
		t.Errorf("d's VIP = %s, want 10.96.0.13", got)
	}
	// Later, e takes the lowest free address: b's.
	last := buildKeep(t, keepScenario(t, []string{"a", "c", "d", "e"}, map[string]int{"a": 1, "c": 1, "d": 1, "e": 1}), mid)
	got := addrsByKey(last)
	if got["svc e.default.svc.cluster.local"] != b["svc b.default.svc.cluster.local"] {
		t.Errorf("e's VIP = %s, want b's freed %s", got["svc e.default.svc.cluster.local"], b["svc b.default.svc.cluster.local"])
	}
	for k, a := range got {
		if strings.Contains(k, "/e-") && a != b[bPod] {
			t.Errorf("%s = %s, want b's freed pod address %s", k, a, b[bPod])
		}
	}
}

// A full range is an error naming the range, as at up.
func TestBuildKeepFullRange(t *testing.T) {
	t.Parallel()
	o := BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/29"), ServiceCIDR: defaultOpts.ServiceCIDR}
	cur, err := keepScenario(t, nil, map[string]int{"a": 5}).Build(o) // .2-.6: full
	if err != nil {
		t.Fatal(err)
	}
	o.Keep = AllocationsOf(cur)
	_, err = keepScenario(t, nil, map[string]int{"a": 5, "b": 1}).Build(o)
	if err == nil || !strings.Contains(err.Error(), "assign pod addresses in 10.244.0.0/29") || !strings.Contains(err.Error(), "no free address left for 1 more") {
		t.Errorf("Build with a full pod range = %v, want the range and the count named", err)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

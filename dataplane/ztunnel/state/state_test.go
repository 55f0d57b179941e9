package state

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/meshlab/meshlab/ambientapi/security"
	"github.com/meshlab/meshlab/ambientapi/workload"
)

func pod(name, ns, sa, node, ip string, services map[string]*workload.PortList) *workload.Address {
	return &workload.Address{Type: &workload.Address_Workload{Workload: &workload.Workload{
		Uid: "Kubernetes//Pod/" + ns + "/" + name, Name: name, Namespace: ns, ServiceAccount: sa, Node: node,
		Addresses: [][]byte{netip.MustParseAddr(ip).AsSlice()}, Services: services,
	}}}
}

func service(ns, name, vip string) *workload.Address {
	return &workload.Address{Type: &workload.Address_Service{Service: &workload.Service{
		Name: name, Namespace: ns, Hostname: name + "." + ns + ".svc.cluster.local",
		Addresses: []*workload.NetworkAddress{{Address: netip.MustParseAddr(vip).AsSlice()}},
		Ports:     []*workload.Port{{ServicePort: 80, TargetPort: 8080}},
	}}}
}

func TestFindByInfoOnlyThisNode(t *testing.T) {
	t.Parallel()
	s := New("ml-lab-node")
	s.ApplyAddresses([]*workload.Address{
		pod("a", "default", "", "ml-lab-node", "10.0.0.1", nil),
		pod("b", "default", "", "other-node", "10.0.0.2", nil),
		pod("c", "default", "reviews", "ml-lab-node", "10.0.0.3", nil),
	}, nil)
	if w := s.FindByInfo(WorkloadInfo{Name: "a", Namespace: "default", ServiceAccount: "default"}); w == nil || w.Identity() != "spiffe://cluster.local/ns/default/sa/default" {
		t.Errorf("a (sa default, elided in WDS) = %v", w)
	}
	if w := s.FindByInfo(WorkloadInfo{Name: "b", Namespace: "default", ServiceAccount: "default"}); w != nil {
		t.Errorf("b is on another node but was found: %v", w.GetUid())
	}
	if w := s.FindByInfo(WorkloadInfo{Name: "c", Namespace: "default", ServiceAccount: "default"}); w != nil {
		t.Error("c found with the wrong service account")
	}
	if w := s.FindByInfo(WorkloadInfo{Name: "c", Namespace: "default", ServiceAccount: "reviews"}); w == nil {
		t.Error("c not found")
	}
}

func TestWaitForInfo(t *testing.T) {
	t.Parallel()
	s := New("n")
	info := WorkloadInfo{Name: "late", Namespace: "ns", ServiceAccount: "sa"}
	if w := s.WaitForInfo(context.Background(), info, 50*time.Millisecond); w != nil {
		t.Fatal("found a workload WDS never sent")
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		s.ApplyAddresses([]*workload.Address{pod("late", "ns", "sa", "n", "10.0.0.9", nil)}, nil)
	}()
	if w := s.WaitForInfo(context.Background(), info, 5*time.Second); w == nil || w.GetName() != "late" {
		t.Fatalf("WaitForInfo = %v, want the workload sent while waiting", w)
	}
}

func TestEndpointsDerivedFromWorkloads(t *testing.T) {
	t.Parallel()
	s := New("n")
	svcKey := "default/reviews.default.svc.cluster.local"
	ports := map[string]*workload.PortList{svcKey: {Ports: []*workload.Port{{ServicePort: 80, TargetPort: 9080}}}}
	s.ApplyAddresses([]*workload.Address{
		service("default", "reviews", "10.96.0.10"),
		pod("r1", "default", "", "n", "10.0.0.1", ports),
		pod("r2", "default", "", "n", "10.0.0.2", ports),
	}, nil)
	svc := s.ServiceByVIP(netip.MustParseAddr("10.96.0.10"), "default")
	if svc == nil || len(svc.Endpoints) != 2 || svc.Endpoints["Kubernetes//Pod/default/r1"].Ports[80] != 9080 {
		t.Fatalf("service = %+v", svc)
	}
	s.ApplyAddresses(nil, []string{"Kubernetes//Pod/default/r1"})
	svc = s.ServiceByVIP(netip.MustParseAddr("10.96.0.10"), "default")
	if len(svc.Endpoints) != 1 {
		t.Errorf("after removing r1: %d endpoints, want 1", len(svc.Endpoints))
	}
	if s.WorkloadByIP(netip.MustParseAddr("10.0.0.1")) != nil {
		t.Error("r1's IP still maps to a workload")
	}
	s.ApplyAddresses(nil, []string{svcKey})
	if s.ServiceByVIP(netip.MustParseAddr("10.96.0.10"), "default") != nil || len(s.ServicesByHostname("reviews.default.svc.cluster.local")) != 0 {
		t.Error("the service outlived its removal")
	}
	// A workload replaced with a new IP loses the old one.
	s.ApplyAddresses([]*workload.Address{pod("r2", "default", "", "n", "10.0.0.22", nil)}, nil)
	if s.WorkloadByIP(netip.MustParseAddr("10.0.0.2")) != nil || s.WorkloadByIP(netip.MustParseAddr("10.0.0.22")) == nil {
		t.Error("r2's address did not move")
	}
}

func TestPoliciesFor(t *testing.T) {
	t.Parallel()
	s := New("n")
	auth := func(ns, name string, scope security.Scope) *security.Authorization {
		return &security.Authorization{Name: name, Namespace: ns, Scope: scope}
	}
	s.ApplyAuthorizations([]*security.Authorization{
		auth("istio-system", "istio_converted_static_strict", security.Scope_WORKLOAD_SELECTOR),
		auth("istio-system", "global", security.Scope_GLOBAL),
		auth("default", "ns-wide", security.Scope_NAMESPACE),
		auth("other", "ns-wide", security.Scope_NAMESPACE),
		auth("default", "selected", security.Scope_WORKLOAD_SELECTOR),
		auth("default", "not-selected", security.Scope_WORKLOAD_SELECTOR),
	}, nil)
	s.ApplyAddresses([]*workload.Address{pod("a", "default", "", "n", "10.0.0.1", nil)}, nil)
	w := s.WorkloadByUID("Kubernetes//Pod/default/a")
	w.AuthorizationPolicies = []string{"default/selected", "istio-system/istio_converted_static_strict", "default/missing"}
	var got []string
	for _, p := range s.PoliciesFor(w) {
		got = append(got, p.GetNamespace()+"/"+p.GetName())
	}
	want := []string{"default/ns-wide", "default/selected", "istio-system/global", "istio-system/istio_converted_static_strict"}
	if !slices.Equal(got, want) {
		t.Errorf("PoliciesFor = %v, want %v", got, want)
	}
	s.ApplyAuthorizations(nil, []string{"default/ns-wide"})
	if len(s.PoliciesFor(w)) != 3 {
		t.Errorf("after removal: %d policies, want 3", len(s.PoliciesFor(w)))
	}
}

// TestEndpointsFollowEachChange: only the services a change touches are derived again,
// into new values (a reader's Service stays as it was), and a Service pushed again keeps
// the endpoints its workloads give it; a workload removed or moved leaves FindByInfo.
func TestEndpointsFollowEachChange(t *testing.T) {
	t.Parallel()
	s := New("n")
	ports := func(key string) map[string]*workload.PortList {
		return map[string]*workload.PortList{key: {Ports: []*workload.Port{{ServicePort: 80, TargetPort: 8080}}}}
	}
	const a, b = "default/a.default.svc.cluster.local", "default/b.default.svc.cluster.local"
	s.ApplyAddresses([]*workload.Address{
		service("default", "a", "10.96.0.1"), service("default", "b", "10.96.0.2"),
		pod("a1", "default", "", "n", "10.0.0.1", ports(a)),
		pod("b1", "default", "", "n", "10.0.0.2", ports(b)),
	}, nil)
	held := s.ServiceByVIP(netip.MustParseAddr("10.96.0.1"), "default")
	heldB := s.ServiceByVIP(netip.MustParseAddr("10.96.0.2"), "default")
	s.ApplyAddresses([]*workload.Address{pod("a2", "default", "", "n", "10.0.0.3", ports(a))}, nil)
	now := s.ServiceByVIP(netip.MustParseAddr("10.96.0.1"), "default")
	if len(held.Endpoints) != 1 || len(now.Endpoints) != 2 {
		t.Errorf("a's endpoints: held %d, now %d; want 1 and 2", len(held.Endpoints), len(now.Endpoints))
	}
	if s.ServiceByVIP(netip.MustParseAddr("10.96.0.2"), "default") != heldB {
		t.Error("b was derived again though nothing of it changed")
	}
	s.ApplyAddresses([]*workload.Address{service("default", "a", "10.96.0.1")}, nil)
	if got := s.ServiceByVIP(netip.MustParseAddr("10.96.0.1"), "default"); len(got.Endpoints) != 2 {
		t.Errorf("a pushed again has %d endpoints, want 2", len(got.Endpoints))
	}
	s.ApplyAddresses([]*workload.Address{pod("a2", "default", "", "other", "10.0.0.3", ports(b))}, []string{"Kubernetes//Pod/default/a1"})
	if got := s.ServiceByVIP(netip.MustParseAddr("10.96.0.1"), "default"); len(got.Endpoints) != 0 {
		t.Errorf("a has %d endpoints after its pods left it, want 0", len(got.Endpoints))
	}
	if got := s.ServiceByVIP(netip.MustParseAddr("10.96.0.2"), "default"); len(got.Endpoints) != 2 {
		t.Errorf("b has %d endpoints, want 2", len(got.Endpoints))
	}
	for _, name := range []string{"a1", "a2"} {
		if w := s.FindByInfo(WorkloadInfo{Name: name, Namespace: "default"}); w != nil {
			t.Errorf("%s found on this node: %s", name, w.GetNode())
		}
	}
	if w := s.FindByInfo(WorkloadInfo{Name: "b1", Namespace: "default"}); w == nil {
		t.Error("b1 not found")
	}
}

// BenchmarkApplyOnePod is one enrollment push as ztunnel gets it at 1000 pods (500
// services, 2 pods each): one pod's Workload changed, then every pod still waiting for
// its workload (here: all) looks itself up.
//
//	go test ./dataplane/ztunnel/state -run '^$' -bench ApplyOnePod
func BenchmarkApplyOnePod(b *testing.B) {
	s := New("n")
	var all []*workload.Address
	for i := range 500 {
		name := fmt.Sprintf("svc-%03d", i)
		all = append(all, service("default", name, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)))
		key := "default/" + name + ".default.svc.cluster.local"
		for r := range 2 {
			all = append(all, pod(fmt.Sprintf("%s-%d", name, r), "default", "", "n", fmt.Sprintf("10.0.%d.%d", (2*i+r)/250, (2*i+r)%250+1),
				map[string]*workload.PortList{key: {Ports: []*workload.Port{{ServicePort: 80, TargetPort: 8080}}}}))
		}
	}
	s.ApplyAddresses(all, nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.ApplyAddresses([]*workload.Address{all[1+3*(i%500)]}, nil)
		for j := range 1000 {
			s.FindByInfo(WorkloadInfo{Name: fmt.Sprintf("svc-%03d-%d", j/2, j%2), Namespace: "default"})
		}
	}
}

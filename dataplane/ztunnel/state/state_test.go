package state

import (
	"context"
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

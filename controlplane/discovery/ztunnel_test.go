package discovery

import (
	"context"
	"slices"
	"testing"
	"time"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	securityv1beta1 "istio.io/api/security/v1beta1"

	"github.com/meshlab/meshlab/ambientapi/security"
	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

const testZtunnel = "ztunnel~10.244.0.100~ztunnel-abcde.istio-system~istio-system.svc.cluster.local"

// ambientHello is helloModel with backend-v1 enrolled in ambient.
func ambientHello() *model.Model {
	m := helloModel()
	p := m.Pod("backend-v1")
	p.Sidecar.Inject = false
	p.Annotations = map[string]string{model.AnnotationAmbientRedirection: model.AmbientRedirectionEnabled}
	return m
}

// subscribeZtunnel opens the two wildcard subscriptions ztunnel opens, with the versions
// it holds (nil on a first connection), and returns the first response of each type.
func subscribeZtunnel(d *deltaStream, held map[string]map[string]string) map[string]*discoverypb.DeltaDiscoveryResponse {
	d.t.Helper()
	for _, typ := range []string{xds.AddressType, xds.AuthorizationType} {
		d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: typ, InitialResourceVersions: held[typ]})
	}
	got := map[string]*discoverypb.DeltaDiscoveryResponse{}
	for len(got) < 2 {
		r := d.recv()
		got[r.GetTypeUrl()] = r
		d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
	}
	return got
}

func versionsOf(r *discoverypb.DeltaDiscoveryResponse) map[string]string {
	out := map[string]string{}
	for _, res := range r.GetResources() {
		out[res.GetName()] = res.GetVersion()
	}
	return out
}

// TestZtunnelDeltaWDS connects as ztunnel does (delta ADS, wildcard Address and
// Authorization) and checks what istiod's WorkloadGenerator does: every workload and
// service by name, HBONE for the redirected pod, a policy change pushing only the
// policies, a removed pod sent as removed, versions on every resource, a reconnect with
// initial_resource_versions sent only what changed meanwhile, Status listing the ztunnel
// with its two types, and no Envoy type ever.
func TestZtunnelDeltaWDS(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1, WDS: xds.WDSOptions{Node: "ml-test-node"}})
	ctx := context.Background()
	m := ambientHello()
	if err := s.UpdateFor(ctx, m, "start"); err != nil {
		t.Fatal(err)
	}
	d := dialDelta(t, "unix://"+s.path, testZtunnel)
	first := subscribeZtunnel(d, nil)
	addrs := first[xds.AddressType]
	wantNames := []string{
		"Kubernetes//Pod/default/backend-v1", "Kubernetes//Pod/default/backend-v2", "Kubernetes//Pod/default/frontend-v1",
		"default/backend.default.svc.cluster.local", "default/frontend.default.svc.cluster.local",
	}
	if got := deltaNames(addrs); !slices.Equal(got, wantNames) {
		t.Fatalf("addresses %v, want %v", got, wantNames)
	}
	for _, res := range addrs.GetResources() {
		var a workload.Address
		if err := res.GetResource().UnmarshalTo(&a); err != nil {
			t.Fatalf("%s: %v", res.GetName(), err)
		}
		if res.GetVersion() == "" || len(res.GetAliases()) != 0 {
			t.Errorf("%s: version %q aliases %v, want a version and no aliases (wildcard)", res.GetName(), res.GetVersion(), res.GetAliases())
		}
		if w := a.GetWorkload(); w != nil {
			if hbone := w.GetTunnelProtocol() == workload.TunnelProtocol_HBONE; hbone != (w.GetName() == "backend-v1") {
				t.Errorf("%s: tunnel protocol %s", w.GetName(), w.GetTunnelProtocol())
			}
		}
	}
	if n := len(first[xds.AuthorizationType].GetResources()); n != 0 {
		t.Errorf("authorizations with no policy: %d", n)
	}
	ps := waitStatus(t, s, testZtunnel, "both types ACKed", func(ps ProxyStatus) bool {
		return len(ps.Types) == 2 && ps.Types[xds.AddressType].Synced() && ps.Types[xds.AuthorizationType].Synced()
	})
	if !ps.Connected || !ps.Delta || ps.Types[xds.AddressType].Want != "v1" {
		t.Errorf("status %+v", ps)
	}

	// A policy: only Authorization is pushed.
	pol := ambientHello()
	pol.Istio.AuthorizationPolicies = append(pol.Istio.AuthorizationPolicies, &model.IstioConfig[*securityv1beta1.AuthorizationPolicy]{
		Name: "deny-all", Namespace: "default", Spec: &securityv1beta1.AuthorizationPolicy{Action: securityv1beta1.AuthorizationPolicy_DENY,
			Rules: []*securityv1beta1.Rule{{}}},
	})
	if err := s.UpdateFor(ctx, pol, "apply: AuthorizationPolicy default/deny-all"); err != nil {
		t.Fatal(err)
	}
	r := d.recv()
	if r.GetTypeUrl() != xds.AuthorizationType || !slices.Equal(deltaNames(r), []string{"default/deny-all"}) {
		t.Fatalf("after a policy: %s %v", r.GetTypeUrl(), deltaNames(r))
	}
	var a security.Authorization
	if err := r.GetResources()[0].GetResource().UnmarshalTo(&a); err != nil || a.GetAction() != security.Action_DENY || a.GetScope() != security.Scope_NAMESPACE {
		t.Errorf("deny-all = %v (%v)", &a, err)
	}
	d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
	d.quiet(200 * time.Millisecond)

	// A pod goes: its workload is removed, the services it backed are unchanged.
	gone := model.New(pol.Services, slices.DeleteFunc(slices.Clone(pol.Pods), func(p *model.Pod) bool { return p.Name == "backend-v2" }))
	gone.Istio = pol.Istio
	if err := s.UpdateFor(ctx, gone, "delete: Pod default/backend-v2"); err != nil {
		t.Fatal(err)
	}
	r = d.recv()
	if r.GetTypeUrl() != xds.AddressType || len(r.GetResources()) != 0 || !slices.Equal(r.GetRemovedResources(), []string{"Kubernetes//Pod/default/backend-v2"}) {
		t.Fatalf("after a pod is gone: %s resources %v removed %v", r.GetTypeUrl(), deltaNames(r), r.GetRemovedResources())
	}
	d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
	d.quiet(200 * time.Millisecond)
	held := map[string]map[string]string{xds.AddressType: versionsOf(addrs), xds.AuthorizationType: {"default/deny-all": "0"}}
	delete(held[xds.AddressType], "Kubernetes//Pod/default/backend-v2")

	// Reconnect holding the addresses: frontend-v1 changed meanwhile (a new label), and the
	// stale policy version is sent again.
	relabel := model.New(gone.Services, gone.Pods)
	relabel.Istio = gone.Istio
	fp := *relabel.Pod("frontend-v1")
	fp.Labels = map[string]string{"app": "frontend", "version": "v9"}
	relabel.Pods[slices.IndexFunc(relabel.Pods, func(p *model.Pod) bool { return p.Name == "frontend-v1" })] = &fp
	if err := s.UpdateFor(ctx, relabel, "relabel"); err != nil {
		t.Fatal(err)
	}
	r = d.recv() // the open stream gets the change
	if !slices.Equal(deltaNames(r), []string{"Kubernetes//Pod/default/frontend-v1"}) {
		t.Fatalf("relabel pushed %v", deltaNames(r))
	}
	d2 := dialDelta(t, "unix://"+s.path, testZtunnel)
	again := subscribeZtunnel(d2, held)
	if got := deltaNames(again[xds.AddressType]); !slices.Equal(got, []string{"Kubernetes//Pod/default/frontend-v1"}) {
		t.Errorf("reconnect sent addresses %v, want only the changed frontend-v1", got)
	}
	if got := deltaNames(again[xds.AuthorizationType]); !slices.Equal(got, []string{"default/deny-all"}) {
		t.Errorf("reconnect sent policies %v, want the stale deny-all", got)
	}

	// A ztunnel asking for an Envoy type is never answered; a sidecar never gets WDS.
	d2.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType})
	d2.quiet(300 * time.Millisecond)
	sc := dialDelta(t, "unix://"+s.path, m.Pod("frontend-v1").NodeID())
	sc.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: xds.AddressType})
	sc.quiet(300 * time.Millisecond)
}

// TestZtunnelSnapshotOnlyOnceConnected checks that a lab without a ztunnel makes no WDS.
func TestZtunnelSnapshotOnlyOnceConnected(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	if err := s.UpdateFor(context.Background(), helloModel(), "start"); err != nil {
		t.Fatal(err)
	}
	s.ztMu.Lock()
	made := s.zt.snap != nil
	s.ztMu.Unlock()
	if made {
		t.Error("WDS made without a ztunnel")
	}
	if nodes, _ := s.ztunnelNodes(); len(nodes) != 0 {
		t.Errorf("ztunnels %v", nodes)
	}
}

// TestZtunnelVersionAfterConnect is the ambient lab's race (its policy step saw a request
// pass before ztunnel had the policy): in a lab of ambient pods only, an update made
// before ztunnel connects pushes nothing and so does not count its version, the snapshot
// ztunnel gets on connecting carries that version, and the next change must not go out
// under the same one: a waiter (lab.WaitSynced) would take ztunnel's ACK of the first
// snapshot for an ACK of the change, and let traffic through before ztunnel had it.
func TestZtunnelVersionAfterConnect(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	ctx := context.Background()
	ambientOnly := func() *model.Model {
		m := ambientHello()
		for _, p := range m.Pods {
			p.Sidecar.Inject = false
		}
		return m
	}
	if err := s.UpdateFor(ctx, ambientOnly(), "start"); err != nil {
		t.Fatal(err)
	}
	d := dialDelta(t, "unix://"+s.path, testZtunnel)
	first := subscribeZtunnel(d, nil)
	isZtunnel := func(node string) bool { return IsZtunnel(node) }
	waitStatus(t, s, testZtunnel, "both types ACKed", func(ps ProxyStatus) bool {
		return len(ps.Types) == 2 && ps.Types[xds.AddressType].Synced() && ps.Types[xds.AuthorizationType].Synced()
	})
	if !s.Synced(isZtunnel) {
		t.Fatalf("ztunnel not synced after ACKing its first snapshot: %v", s.Status())
	}

	pol := ambientOnly()
	pol.Istio.AuthorizationPolicies = append(pol.Istio.AuthorizationPolicies, &model.IstioConfig[*securityv1beta1.AuthorizationPolicy]{
		Name: "deny-all", Namespace: "default", Spec: &securityv1beta1.AuthorizationPolicy{Action: securityv1beta1.AuthorizationPolicy_DENY,
			Rules: []*securityv1beta1.Rule{{}}},
	})
	if err := s.UpdateFor(ctx, pol, "apply: AuthorizationPolicy default/deny-all"); err != nil {
		t.Fatal(err)
	}
	// Before ztunnel has ACKed the policy (the test has not even read it), nothing may
	// call it synced.
	if s.Synced(isZtunnel) {
		node, why := s.Unsynced(isZtunnel)
		t.Errorf("ztunnel synced before it was sent the policy (unsynced: %q %q)", node, why)
	}
	_, since := s.ztunnelNodes()
	was := first[xds.AuthorizationType].GetSystemVersionInfo()
	if since[xds.AuthorizationType] == was {
		t.Errorf("the policy's version %q is the one ztunnel ACKed for its first snapshot", was)
	}
	r := d.recv()
	if r.GetTypeUrl() != xds.AuthorizationType || r.GetSystemVersionInfo() == was {
		t.Fatalf("after the policy: %s version %q, want Authorization in a version other than %q", r.GetTypeUrl(), r.GetSystemVersionInfo(), was)
	}
	d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
	deadline := time.Now().Add(10 * time.Second)
	for !s.Synced(isZtunnel) {
		if time.Now().After(deadline) {
			node, why := s.Unsynced(isZtunnel)
			t.Fatalf("ztunnel not synced after ACKing the policy: %q %q", node, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

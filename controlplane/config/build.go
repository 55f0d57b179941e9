package config

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// vipOffset is the offset of the first service VIP in the service CIDR: the low addresses
// stay free, as Kubernetes keeps them for the API server (.1) and DNS (.10).
const vipOffset = 10

// BuildOptions says where a scenario's addresses come from.
type BuildOptions struct {
	// PodCIDR is required. Its first host is the gateway (the node bridge); pods get the
	// next addresses in model order (sorted by namespace, then name).
	PodCIDR netip.Prefix
	// ServiceCIDR is required. Service VIPs start at the prefix address + 10 (10.96.0.10
	// in 10.96.0.0/16), in model order.
	ServiceCIDR netip.Prefix
	// Keep is optional: the addresses of a running lab's model (AllocationsOf), so that a
	// change keeps them, as Kubernetes never renumbers a running pod or a Service. Pods and
	// Services it names keep their addresses; new ones get the lowest address that neither
	// a kept one nor anything in Keep holds (a removed pod's address may still be on its
	// draining namespace). Nil allocates in model order from the start of each range.
	Keep *Allocations
	// Note, when set, is told what Build did that the input did not ask for: a Service's
	// clusterIP that does not fit ServiceCIDR, and the address it got instead.
	Note func(string)
}

// PodKey names a pod for address allocation: pod names may repeat across namespaces.
type PodKey struct{ Namespace, Name string }

// Allocations are what a running model's pods and Services keep across a change: pod
// IPs by pod, Service VIPs by hostname, and the sidecar choice of each pod a Kubernetes
// workload made (Istio's injector decides it once, when the pod is created: a namespace
// labelled later changes the pods made after, not the running ones).
type Allocations struct {
	Pods     map[PodKey]netip.Addr
	VIPs     map[string]netip.Addr
	Injected map[PodKey]bool
	// Entries are the ServiceEntry hosts' autoallocated addresses, which istiod keeps
	// in the ServiceEntry's status once given.
	Entries map[model.EntryHost]netip.Addr
}

// AllocationsOf returns the addresses m's pods and Services hold, for BuildOptions.Keep.
func AllocationsOf(m *model.Model) *Allocations {
	a := &Allocations{Pods: map[PodKey]netip.Addr{}, VIPs: map[string]netip.Addr{}, Injected: map[PodKey]bool{}}
	for _, p := range m.Pods {
		a.Pods[PodKey{p.Namespace, p.Name}] = p.IP
		if kubeWorkloadKinds[p.Origin.Kind] != "" {
			a.Injected[PodKey{p.Namespace, p.Name}] = p.Sidecar.Inject
		}
	}
	for _, s := range m.Services {
		a.VIPs[s.Hostname()] = s.VIP
	}
	a.Entries = maps.Clone(m.Istio.AutoAddresses)
	return a
}

// Build returns the mesh model of the scenario with addresses assigned deterministically:
// the same scenario and options always give the same addresses (with o.Keep, the running
// lab's addresses stay where they are). It fails when a CIDR is
// missing, the two overlap, or one is too small. Build may be called more than once; each
// model is independent of the others and of the scenario.
func (s *Scenario) Build(o BuildOptions) (*model.Model, error) {
	if !o.PodCIDR.IsValid() {
		return nil, errors.New("build model: pod CIDR is required")
	}
	if !o.ServiceCIDR.IsValid() {
		return nil, errors.New("build model: service CIDR is required")
	}
	podCIDR, svcCIDR := o.PodCIDR.Masked(), o.ServiceCIDR.Masked()
	if podCIDR.Overlaps(svcCIDR) {
		return nil, fmt.Errorf("build model: pod CIDR %s overlaps service CIDR %s", podCIDR, svcCIDR)
	}
	var svcs []*model.Service
	var pods []*model.Pod
	for _, obj := range s.Objects {
		if obj.svc != nil {
			svcs = append(svcs, cloneService(obj.svc))
		}
		for _, p := range obj.pods {
			pods = append(pods, clonePod(p))
		}
	}
	var injected map[PodKey]bool
	if o.Keep != nil {
		injected = o.Keep.Injected
	}
	injectPods(s.Objects, pods, injected)
	mountVolumes(s.Objects, pods) // volumes.go
	gwSvcs, gwPods, err := gatewayDeployments(s.Objects)
	if err != nil {
		return nil, fmt.Errorf("build model: %w", err)
	}
	apiSvcs, apiPods, err := gatewayAPIDeployments(s.Objects)
	if err != nil {
		return nil, fmt.Errorf("build model: %w", err)
	}
	gwSvcs, gwPods = append(gwSvcs, apiSvcs...), append(gwPods, apiPods...)
	wpSvcs, wpPods, err := waypointDeployments(s.Objects)
	if err != nil {
		return nil, fmt.Errorf("build model: %w", err)
	}
	gwSvcs, gwPods = append(gwSvcs, wpSvcs...), append(gwPods, wpPods...)
	m := model.New(append(svcs, gwSvcs...), append(pods, gwPods...))
	m.Secrets = secretsOf(s.Objects)
	m.Namespaces = namespacesOf(s.Objects)
	m.Waypoints = waypointsOf(s.Objects)
	m.ExternalNames = externalNamesOf(s.Objects) // service.go
	var keepPods map[PodKey]netip.Addr
	var keepVIPs map[string]netip.Addr
	if o.Keep != nil {
		keepPods, keepVIPs = o.Keep.Pods, o.Keep.VIPs
	}
	podKeys := make([]PodKey, len(m.Pods))
	for i, p := range m.Pods {
		podKeys[i] = PodKey{p.Namespace, p.Name}
	}
	// The gateway takes offset 1, pods follow from offset 2.
	podIPs, err := allocate(podCIDR, 2, podKeys, keepPods)
	if err != nil {
		return nil, fmt.Errorf("assign pod addresses in %s (the gateway takes the first host): %w", podCIDR, err)
	}
	for i, p := range m.Pods {
		p.IP = podIPs[i]
	}
	hosts := make([]string, len(m.Services))
	for i, svc := range m.Services {
		hosts[i] = svc.Hostname()
	}
	want, asked := declaredVIPs(s.Objects, svcCIDR, keepVIPs, o.Note)
	vips, err := allocate(svcCIDR, vipOffset, hosts, want)
	if err != nil {
		return nil, fmt.Errorf("assign service VIPs in %s (from offset %d): %w", svcCIDR, vipOffset, err)
	}
	for i, svc := range m.Services {
		svc.VIP = vips[i]
		if a, ok := asked[svc.Hostname()]; ok && a != svc.VIP && o.Note != nil {
			o.Note(fmt.Sprintf("%s: spec.clusterIP %s is taken by another Service: it gets %s", svc.Origin, a, svc.VIP))
		}
	}
	if m.Istio, m.Mesh, err = istioModel(s.Objects, m); err != nil {
		return nil, fmt.Errorf("build model: %w", err)
	}
	var keepEntries map[model.EntryHost]netip.Addr
	if o.Keep != nil {
		keepEntries = o.Keep.Entries
	}
	if m.Istio.AutoAddresses, err = autoAllocate(m.Istio.ServiceEntries, keepEntries); err != nil {
		return nil, fmt.Errorf("build model: %w", err)
	}
	return m, nil
}

// autoAllocate gives every host of the ServiceEntries istiod's IP autoallocator serves
// an address of model.AutoAllocatePrefix, as its controller does: a host keeps the one it
// has (istiod keeps it in the ServiceEntry's status), a new one takes the lowest free.
func autoAllocate(entries []*model.IstioConfig[*networking.ServiceEntry], keep map[model.EntryHost]netip.Addr) (map[model.EntryHost]netip.Addr, error) {
	var keys []model.EntryHost
	for _, se := range entries {
		if !model.AutoAllocates(se) {
			continue
		}
		for _, h := range se.Spec.GetHosts() {
			if model.AutoAllocatedHost(se, h) {
				keys = append(keys, model.EntryHost{Namespace: se.Namespace, Name: se.Name, Host: h})
			}
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	addrs, err := allocate(model.AutoAllocatePrefix, 1, keys, keep)
	if err != nil {
		return nil, fmt.Errorf("allocate ServiceEntry addresses in %s: %w", model.AutoAllocatePrefix, err)
	}
	out := make(map[model.EntryHost]netip.Addr, len(keys))
	for i, k := range keys {
		out[k] = addrs[i]
	}
	return out, nil
}

// declaredVIPs returns keep (a running lab's VIPs, which win: Kubernetes never
// renumbers a Service) with the clusterIP each new Service of objs asks for, when it lies
// in the service range past the addresses Kubernetes keeps (vipOffset); note is told of
// each clusterIP that does not fit, which then gets an address of the range. asked holds
// the clusterIPs that fit, by hostname.
func declaredVIPs(objs []*Object, svcCIDR netip.Prefix, keep map[string]netip.Addr, note func(string)) (out, asked map[string]netip.Addr) {
	out, asked = maps.Clone(keep), map[string]netip.Addr{}
	first := svcCIDR.Addr()
	for range vipOffset {
		first = first.Next()
	}
	for _, o := range objs {
		if o.svc == nil || o.Service == nil {
			continue
		}
		want, err := netip.ParseAddr(o.Service.Spec.ClusterIP)
		host := o.svc.Hostname()
		if err != nil {
			continue
		}
		if _, kept := keep[host]; kept {
			continue
		}
		if !svcCIDR.Contains(want) || want.Compare(first) < 0 || want == lastAddr(svcCIDR) {
			if note != nil {
				note(fmt.Sprintf("%s: spec.clusterIP %s is outside the lab's service range %s (from %s): the Service gets an address of the range (choose the range with --service-cidr)", o.Origin, want, svcCIDR, first))
			}
			continue
		}
		if out == nil {
			out = map[string]netip.Addr{}
		}
		out[host], asked[host] = want, want
	}
	return out, asked
}

// Gateway returns the gateway address of a pod CIDR: its first host, which the node
// bridge holds and every pod routes through.
func Gateway(podCIDR netip.Prefix) netip.Addr {
	return podCIDR.Masked().Addr().Next()
}

// allocate returns an address of prefix for each key, from offset on: a key in keep
// keeps its address when that lies in the range and no earlier key took it; the others
// take, in order, the lowest addresses that no key kept and keep does not hold. With
// keep empty that is n consecutive addresses from offset, as addresses gives.
func allocate[K comparable](prefix netip.Prefix, offset int, keys []K, keep map[K]netip.Addr) ([]netip.Addr, error) {
	if len(keep) == 0 {
		return addresses(prefix, offset, len(keys))
	}
	first := prefix.Addr()
	for range offset {
		first = first.Next()
	}
	last := lastAddr(prefix) // the broadcast address, never given
	taken := map[netip.Addr]bool{}
	for _, a := range keep {
		taken[a] = true
	}
	out := make([]netip.Addr, len(keys))
	kept := map[netip.Addr]bool{}
	for i, k := range keys {
		if a, ok := keep[k]; ok && prefix.Contains(a) && a.Compare(first) >= 0 && a.Compare(last) < 0 && !kept[a] {
			out[i], kept[a] = a, true
		}
	}
	next := first
	for i := range keys {
		if out[i].IsValid() {
			continue
		}
		for taken[next] && next.Compare(last) < 0 {
			next = next.Next()
		}
		if next.Compare(last) >= 0 {
			return nil, fmt.Errorf("no free address left for %d more", countInvalid(out[i:]))
		}
		out[i] = next
		taken[next] = true
	}
	return out, nil
}

// lastAddr is the last address of prefix.
func lastAddr(prefix netip.Prefix) netip.Addr {
	a := prefix.Masked().Addr().As16()
	bits := prefix.Bits()
	if prefix.Addr().Is4() {
		bits += 96
	}
	for i := bits; i < 128; i++ {
		a[i/8] |= 1 << (7 - i%8)
	}
	out := netip.AddrFrom16(a)
	if prefix.Addr().Is4() {
		out = out.Unmap()
	}
	return out
}

func countInvalid(as []netip.Addr) int {
	n := 0
	for _, a := range as {
		if !a.IsValid() {
			n++
		}
	}
	return n
}

// addresses returns n consecutive addresses of prefix starting at offset from the prefix
// address, refusing the prefix's last address (the IPv4 broadcast address).
func addresses(prefix netip.Prefix, offset, n int) ([]netip.Addr, error) {
	bits := prefix.Addr().BitLen() - prefix.Bits()
	if bits < 62 {
		room := (1 << bits) - 1 - offset // usable addresses at offset..last-1
		if room < n {
			return nil, fmt.Errorf("room for %d addresses, %d needed", max(room, 0), n)
		}
	}
	out := make([]netip.Addr, 0, n)
	a := prefix.Addr()
	for range offset {
		a = a.Next()
	}
	for range n {
		out = append(out, a)
		a = a.Next()
	}
	return out, nil
}

func cloneService(s *model.Service) *model.Service {
	c := *s
	c.Ports = append([]model.ServicePort(nil), s.Ports...)
	c.Selector = maps.Clone(s.Selector)
	c.Labels = maps.Clone(s.Labels)
	return &c
}

func clonePod(p *model.Pod) *model.Pod {
	c := *p
	c.Labels = maps.Clone(p.Labels)
	c.Annotations = maps.Clone(p.Annotations)
	c.Ports = append([]uint16(nil), p.Ports...)
	c.App.Command = append([]string(nil), p.App.Command...)
	c.App.Upstreams = append([]string(nil), p.App.Upstreams...)
	c.App.Args = append([]string(nil), p.App.Args...)
	c.App.Files = append([]model.File(nil), p.App.Files...)
	return &c
}

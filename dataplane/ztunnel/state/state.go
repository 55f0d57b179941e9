// Package state is ztunnel's view of the mesh, built from WDS: workloads by uid and by IP,
// services by hostname and VIP with their endpoints derived from every Workload.services
// map that names them (WDS carries no endpoints), and the L4 authorization policies. It
// answers the data path's questions (which workload is this pod, where does this address
// go, which policies apply) as ztunnel's ProxyState does.
package state

import (
	"context"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/ambientapi/security"
	"github.com/meshlab/meshlab/ambientapi/workload"
)

// DefaultTrustDomain is the trust domain WDS elides.
const DefaultTrustDomain = "cluster.local"

// Workload is a WDS Workload with what the data path derives from it.
type Workload struct {
	*workload.Workload
	IPs []netip.Addr
}

// Identity is the workload's SPIFFE id: spiffe://<td>/ns/<ns>/sa/<sa> with WDS's elided
// defaults (cluster.local, default) filled back in.
func (w *Workload) Identity() string {
	return SpiffeID(w.GetTrustDomain(), w.GetNamespace(), w.GetServiceAccount())
}

// HBONE reports whether the workload is reached over HBONE (its pod is captured).
func (w *Workload) HBONE() bool { return w.GetTunnelProtocol() == workload.TunnelProtocol_HBONE }

// SpiffeID renders an identity, with WDS's elided trust domain and service account.
func SpiffeID(td, ns, sa string) string {
	if td == "" {
		td = DefaultTrustDomain
	}
	if sa == "" {
		sa = "default"
	}
	return "spiffe://" + td + "/ns/" + ns + "/sa/" + sa
}

// Endpoint is one workload behind a service, with its service-port -> target-port map.
type Endpoint struct {
	WorkloadUID string
	Ports       map[uint32]uint32
}

// Service is a WDS Service with its VIPs parsed and its endpoints derived.
type Service struct {
	*workload.Service
	VIPs      []netip.Addr
	Ports     map[uint32]uint32 // service port -> target port (0: the endpoint's own)
	Endpoints map[string]Endpoint
}

// Key is the service's WDS resource name, "<ns>/<hostname>".
func (s *Service) Key() string { return s.GetNamespace() + "/" + s.GetHostname() }

// Store holds the mesh as WDS last described it. Safe for concurrent use; readers get
// immutable values (a change replaces a Workload or Service, never edits it).
type Store struct {
	node string // NODE_NAME: FindByInfo only sees this node's workloads

	mu        sync.RWMutex
	workloads map[string]*Workload
	byIP      map[netip.Addr]*Workload
	byInfo    map[WorkloadInfo]map[string]*Workload // this node's, by what ZDS says of a pod (service account defaulted), then uid
	members   map[string]map[string]*Workload       // by the service key a workload's services map names, then uid
	services  map[string]*Service                   // by "<ns>/<hostname>"
	byVIP     map[netip.Addr][]*Service
	policies  map[string]*security.Authorization // by "<ns>/<name>"
	changed   chan struct{}                      // closed and replaced on every change
	version   uint64                             // counts changes
}

// New makes an empty store for a ztunnel on node.
func New(node string) *Store {
	return &Store{
		node:      node,
		workloads: map[string]*Workload{},
		byIP:      map[netip.Addr]*Workload{},
		byInfo:    map[WorkloadInfo]map[string]*Workload{},
		members:   map[string]map[string]*Workload{},
		services:  map[string]*Service{},
		byVIP:     map[netip.Addr][]*Service{},
		policies:  map[string]*security.Authorization{},
		changed:   make(chan struct{}),
	}
}

// Changed returns a channel closed at the next change of the store.
func (s *Store) Changed() <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.changed
}

// Version counts the store's changes (for caches of what is derived from it).
func (s *Store) Version() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.version
}

func (s *Store) notifyLocked() {
	s.version++
	close(s.changed)
	s.changed = make(chan struct{})
}

// ApplyAddresses upserts Workloads and Services and removes the named resources (a
// workload uid or a service's "<ns>/<hostname>"), then re-derives the endpoints of the
// services whose workloads or selves changed. Each WDS push carries only what changed,
// and a lab coming up pushes about once per pod: re-deriving every service from every
// workload on each made a 1000-pod `up` quadratic.
func (s *Store) ApplyAddresses(upserts []*workload.Address, removed []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dirty := map[string]bool{}
	for _, name := range removed {
		if w, ok := s.workloads[name]; ok {
			s.removeWorkloadLocked(w, dirty)
			continue
		}
		if svc, ok := s.services[name]; ok {
			s.removeServiceLocked(svc)
		}
	}
	for _, a := range upserts {
		switch {
		case a.GetWorkload() != nil:
			w := &Workload{Workload: a.GetWorkload()}
			for _, b := range w.GetAddresses() {
				if ip, ok := netip.AddrFromSlice(b); ok {
					w.IPs = append(w.IPs, ip.Unmap())
				}
			}
			if old, ok := s.workloads[w.GetUid()]; ok {
				s.removeWorkloadLocked(old, dirty)
			}
			s.addWorkloadLocked(w, dirty)
		case a.GetService() != nil:
			svc := &Service{Service: a.GetService(), Ports: map[uint32]uint32{}}
			for _, na := range svc.GetAddresses() {
				if ip, ok := netip.AddrFromSlice(na.GetAddress()); ok {
					svc.VIPs = append(svc.VIPs, ip.Unmap())
				}
			}
			for _, p := range svc.GetPorts() {
				svc.Ports[p.GetServicePort()] = p.GetTargetPort()
			}
			if old, ok := s.services[svc.Key()]; ok {
				s.removeServiceLocked(old)
			}
			s.services[svc.Key()] = svc
			for _, ip := range svc.VIPs {
				s.byVIP[ip] = append(s.byVIP[ip], svc)
			}
			dirty[svc.Key()] = true
		}
	}
	for key := range dirty {
		s.deriveEndpointsLocked(key)
	}
	s.notifyLocked()
}

// infoOf is what ZDS would say of w's pod.
func infoOf(w *Workload) WorkloadInfo {
	sa := w.GetServiceAccount()
	if sa == "" {
		sa = "default"
	}
	return WorkloadInfo{Name: w.GetName(), Namespace: w.GetNamespace(), ServiceAccount: sa}
}

// addWorkloadLocked files w everywhere it is looked up; the services it names are dirty.
func (s *Store) addWorkloadLocked(w *Workload, dirty map[string]bool) {
	uid := w.GetUid()
	s.workloads[uid] = w
	for _, ip := range w.IPs {
		s.byIP[ip] = w
	}
	if w.GetNode() == s.node {
		info := infoOf(w)
		if s.byInfo[info] == nil {
			s.byInfo[info] = map[string]*Workload{}
		}
		s.byInfo[info][uid] = w
	}
	for key := range w.GetServices() {
		if s.members[key] == nil {
			s.members[key] = map[string]*Workload{}
		}
		s.members[key][uid] = w
		dirty[key] = true
	}
}

func (s *Store) removeWorkloadLocked(w *Workload, dirty map[string]bool) {
	uid := w.GetUid()
	delete(s.workloads, uid)
	for _, ip := range w.IPs {
		if s.byIP[ip] == w {
			delete(s.byIP, ip)
		}
	}
	info := infoOf(w)
	if s.byInfo[info][uid] == w {
		delete(s.byInfo[info], uid)
		if len(s.byInfo[info]) == 0 {
			delete(s.byInfo, info)
		}
	}
	for key := range w.GetServices() {
		if s.members[key][uid] == w {
			delete(s.members[key], uid)
			if len(s.members[key]) == 0 {
				delete(s.members, key)
			}
		}
		dirty[key] = true
	}
}

func (s *Store) removeServiceLocked(svc *Service) {
	delete(s.services, svc.Key())
	for _, ip := range svc.VIPs {
		s.byVIP[ip] = slices.DeleteFunc(slices.Clone(s.byVIP[ip]), func(o *Service) bool { return o == svc })
		if len(s.byVIP[ip]) == 0 {
			delete(s.byVIP, ip)
		}
	}
}

// deriveEndpointsLocked derives the endpoints of the service key from the workloads whose
// services maps name it, into a new Service value (readers hold the old one). Unhealthy
// workloads are left out unless the service allows all (ztunnel's OnlyHealthy default).
func (s *Store) deriveEndpointsLocked(key string) {
	svc, ok := s.services[key]
	if !ok {
		return
	}
	allowAll := svc.GetLoadBalancing().GetHealthPolicy() == workload.LoadBalancing_ALLOW_ALL
	got := map[string]Endpoint{}
	for uid, w := range s.members[key] {
		if w.GetStatus() == workload.WorkloadStatus_UNHEALTHY && !allowAll {
			continue
		}
		ports := map[uint32]uint32{}
		for _, p := range w.GetServices()[key].GetPorts() {
			ports[p.GetServicePort()] = p.GetTargetPort()
		}
		got[uid] = Endpoint{WorkloadUID: uid, Ports: ports}
	}
	next := *svc
	next.Endpoints = got
	s.services[key] = &next
	for _, ip := range next.VIPs {
		s.byVIP[ip] = slices.Clone(s.byVIP[ip])
		for i, o := range s.byVIP[ip] {
			if o == svc {
				s.byVIP[ip][i] = &next
			}
		}
	}
}

// ApplyAuthorizations upserts policies and removes the named ones ("<ns>/<name>").
func (s *Store) ApplyAuthorizations(upserts []*security.Authorization, removed []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range removed {
		delete(s.policies, name)
	}
	for _, p := range upserts {
		s.policies[p.GetNamespace()+"/"+p.GetName()] = p
	}
	s.notifyLocked()
}

// WorkloadInfo is what the node agent says of a pod over ZDS.
type WorkloadInfo struct {
	Name, Namespace, ServiceAccount string
}

// FindByInfo returns the workload of this node with the pod's name, namespace and
// service account (ztunnel's find_by_info: only workloads whose node is this ztunnel's).
func (s *Store) FindByInfo(info WorkloadInfo) *Workload {
	if info.ServiceAccount == "" {
		info.ServiceAccount = "default"
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var found *Workload
	for uid, w := range s.byInfo[info] { // one, unless WDS names two workloads alike
		if found == nil || uid < found.GetUid() {
			found = w
		}
	}
	return found
}

// WaitForInfo is FindByInfo waiting up to timeout for WDS to name the workload (ztunnel
// waits 5 s before it gives up on a pod). It returns nil on timeout or when ctx ends.
func (s *Store) WaitForInfo(ctx context.Context, info WorkloadInfo, timeout time.Duration) *Workload {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ch := s.Changed()
		if w := s.FindByInfo(info); w != nil {
			return w
		}
		select {
		case <-ch:
		case <-deadline.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// WorkloadByUID returns the workload named uid, or nil.
func (s *Store) WorkloadByUID(uid string) *Workload {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.workloads[uid]
}

// WorkloadByIP returns the workload with address ip, or nil.
func (s *Store) WorkloadByIP(ip netip.Addr) *Workload {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byIP[ip.Unmap()]
}

// ServiceByVIP returns the service behind vip best for a client of namespace ns: one
// visible to ns, in ns if any, else a canonical one, else the first by hostname.
func (s *Store) ServiceByVIP(vip netip.Addr, ns string) *Service {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return best(s.byVIP[vip.Unmap()], ns)
}

// best picks as ztunnel's ServiceMatch: visible, same namespace, canonical, then name order.
func best(svcs []*Service, ns string) *Service {
	var cands []*Service
	for _, svc := range svcs {
		if svc.GetVisibility() == workload.Service_NAMESPACE && ns != "" && svc.GetNamespace() != ns {
			continue
		}
		cands = append(cands, svc)
	}
	if len(cands) == 0 {
		return nil
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if (a.GetNamespace() == ns) != (b.GetNamespace() == ns) {
			return a.GetNamespace() == ns
		}
		if a.GetCanonical() != b.GetCanonical() {
			return a.GetCanonical()
		}
		return a.Key() < b.Key()
	})
	return cands[0]
}

// ServicesByHostname returns the services whose hostname is host (any namespace).
func (s *Store) ServicesByHostname(host string) []*Service {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*Service
	for _, svc := range s.services {
		if strings.EqualFold(svc.GetHostname(), host) {
			out = append(out, svc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// Workloads returns every workload, sorted by uid.
func (s *Store) Workloads() []*Workload {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Workload, 0, len(s.workloads))
	for _, w := range s.workloads {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetUid() < out[j].GetUid() })
	return out
}

// Services returns every service, sorted by "<ns>/<hostname>".
func (s *Store) Services() []*Service {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Service, 0, len(s.services))
	for _, svc := range s.services {
		out = append(out, svc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// Policies returns every authorization policy, sorted by "<ns>/<name>".
func (s *Store) Policies() []*security.Authorization {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*security.Authorization, 0, len(s.policies))
	for _, p := range s.policies {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].GetNamespace()+"/"+out[i].GetName() < out[j].GetNamespace()+"/"+out[j].GetName()
	})
	return out
}

// PoliciesFor returns the policies that apply to a destination workload, as ztunnel
// gathers them: NAMESPACE-scoped ones of its namespace, GLOBAL ones, and the selector
// policies its WDS entry names (unknown names skipped). Sorted by "<ns>/<name>".
func (s *Store) PoliciesFor(w *Workload) []*security.Authorization {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := map[string]bool{}
	var out []*security.Authorization
	add := func(key string, p *security.Authorization) {
		if !seen[key] {
			seen[key] = true
			out = append(out, p)
		}
	}
	for key, p := range s.policies {
		switch p.GetScope() {
		case security.Scope_GLOBAL:
			add(key, p)
		case security.Scope_NAMESPACE:
			if p.GetNamespace() == w.GetNamespace() {
				add(key, p)
			}
		}
	}
	for _, name := range w.GetAuthorizationPolicies() {
		if p, ok := s.policies[name]; ok {
			add(name, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].GetNamespace()+"/"+out[i].GetName() < out[j].GetNamespace()+"/"+out[j].GetName()
	})
	return out
}

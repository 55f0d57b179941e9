package xds

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/controlplane/model"
)

// WDS, the workload discovery istiod serves to ztunnel: one istio.workload.Address per
// pod with an IP and per service, shaped as istiod's ambient index builds them
// (pilot/pkg/serviceregistry/ambient: workloads.go, services.go), so that meshlab's
// output diffs cleanly against istiod's in the fidelity module. The functions are pure:
// the model and options in, protos out.

// Type URLs of the ambient resources, as istiod and ztunnel name them.
const (
	AddressType       = "type.googleapis.com/istio.workload.Address"
	AuthorizationType = "type.googleapis.com/istio.security.Authorization"
)

// DefaultClusterID is the cluster id istiod gives a single cluster ("Kubernetes"); it
// starts every pod's uid.
const DefaultClusterID = "Kubernetes"

// WDSOptions are what WDS needs beyond the model.
type WDSOptions struct {
	// Node is the lab's node name (ml-<lab>-node), every pod's Workload.node: ztunnel
	// takes for its own only the workloads of its node. Required.
	Node string
	// ClusterID is the cluster id, DefaultClusterID when "". Optional.
	ClusterID string
	// Unhealthy reports whether a pod is not ready (Workload.status UNHEALTHY, as istiod
	// reads the PodReady condition). Optional: nil means every pod is ready.
	Unhealthy func(*model.Pod) bool
	// WaypointReady reports whether a waypoint counts: istiod reads a waypoint only once
	// its Gateway's status has addresses, which the deployment controller writes when
	// the waypoint's pod is ready. Optional: nil means every waypoint is ready.
	WaypointReady func(*model.Waypoint) bool
}

// Labels and values istiod reads for WDS.
const (
	// tunnelLabel lists the tunnel protocols a workload speaks natively ("http" is HBONE).
	tunnelLabel = "networking.istio.io/tunnel"
	// Canonical service labels, in the order Istio looks them up (pkg/kube/labels).
	canonicalNameLabel     = "service.istio.io/canonical-name"
	canonicalRevisionLabel = "service.istio.io/canonical-revision"
)

// Addresses returns the WDS resources of m: a Workload for every pod with an IP (sidecar
// pods and gateways too, as istiod sends them all), in the model's pod order, then a
// Service for every Kubernetes Service and every ServiceEntry host, by resource name.
func Addresses(m *model.Model, o WDSOptions) []*workload.Address {
	b := NewAddressBuilder(m, o)
	out := make([]*workload.Address, 0, len(m.Pods)+len(b.svcs))
	for _, p := range m.Pods {
		if a := b.Pod(p); a != nil {
			out = append(out, a)
		}
	}
	return append(out, b.Rest()...)
}

// AddressBuilder makes m's WDS addresses (Addresses) one pod at a time, for a caller that
// keeps the Workloads of pods that did not change: what every pod's Workload reads
// besides the pod itself (the model's services and the index of their selectors) is
// made once, by NewAddressBuilder.
type AddressBuilder struct {
	m         *model.Model
	o         WDSOptions
	svcs      []*wdsService
	selecting selectorIndex
}

// NewAddressBuilder returns the AddressBuilder of m.
func NewAddressBuilder(m *model.Model, o WDSOptions) *AddressBuilder {
	b := &AddressBuilder{m: m, o: o, svcs: wdsServices(m, o), selecting: selectorIndex{}}
	for _, s := range b.svcs {
		b.selecting.add(s)
	}
	return b
}

// Next returns the AddressBuilder of m with o, for m that differs from b's model at most
// in its pods (SameButPods): b's services and their index are kept.
func (b *AddressBuilder) Next(m *model.Model, o WDSOptions) *AddressBuilder {
	n := *b
	n.m, n.o = m, o
	return &n
}

// PodName is the resource name of pod p's Workload address (its uid).
func (b *AddressBuilder) PodName(p *model.Pod) string {
	return PodUID(b.o.ClusterID, p.Namespace, p.Name)
}

// Pod returns pod p's Workload address, nil for a pod without an IP. It reads p, the
// model's other fields (not its other pods) and o.Unhealthy(p), and o.WaypointReady when
// the model has waypoints.
func (b *AddressBuilder) Pod(p *model.Pod) *workload.Address {
	w := podWorkload(b.m, p, b.selecting, b.o)
	if w == nil {
		return nil
	}
	return &workload.Address{Type: &workload.Address_Workload{Workload: w}}
}

// Rest returns the addresses that are not pods': ServiceEntries' workloads, then every
// service. They read the model's fields other than its pods.
func (b *AddressBuilder) Rest() []*workload.Address {
	var out []*workload.Address
	for _, se := range b.m.Istio.ServiceEntries {
		for _, w := range serviceEntryWorkloads(b.m, se, b.svcs, b.o) {
			out = append(out, &workload.Address{Type: &workload.Address_Workload{Workload: w}})
		}
	}
	for _, s := range b.svcs {
		out = append(out, &workload.Address{Type: &workload.Address_Service{Service: s.svc}})
	}
	return out
}

// serviceEntryWorkloads returns a ServiceEntry's endpoints as Workloads (istiod's
// serviceEntryWorkloadBuilder): one per endpoint, or, for a DNS resolution without
// endpoints nor workloadSelector, one per host named by that host. Each is served by the
// ServiceEntry's WDS services that survived deduplication (none: no workload), its port
// named as a service port taking that port; uid
// <cluster>/networking.istio.io/ServiceEntry/<ns>/<name>/<address>. meshlab does not keep a
// ServiceEntry's own labels, so its workloads' canonical name is the ServiceEntry's and no
// selector policy names them.
func serviceEntryWorkloads(m *model.Model, se *model.IstioConfig[*networking.ServiceEntry], svcs []*wdsService, o WDSOptions) []*workload.Workload {
	spec := se.Spec
	if spec == nil {
		return nil
	}
	eps := spec.GetEndpoints()
	res := spec.GetResolution()
	implicit := len(eps) == 0 && spec.GetWorkloadSelector() == nil &&
		(res == networking.ServiceEntry_DNS || res == networking.ServiceEntry_DNS_ROUND_ROBIN || res == networking.ServiceEntry_DYNAMIC_DNS)
	if len(eps) == 0 && !implicit {
		return nil
	}
	var own []*wdsService
	for _, s := range svcs {
		if s.entry == se {
			own = append(own, s)
		}
	}
	if len(own) == 0 {
		return nil
	}
	if implicit {
		eps = nil
		for _, s := range own {
			eps = append(eps, &networking.WorkloadEntry{Address: s.svc.Hostname})
		}
	}
	cluster := cmp.Or(o.ClusterID, DefaultClusterID)
	policies := workloadPolicies(m, &model.Pod{Namespace: se.Namespace})
	out := make([]*workload.Workload, 0, len(eps))
	for i, wle := range eps {
		served := own
		var wp *model.Waypoint
		if implicit {
			served = own[i : i+1]
		} else {
			// An endpoint attaches to a workload waypoint by its own labels, else its
			// namespace's (istiod's computeWaypoint on the endpoint).
			wp = m.WaypointOfWorkload(&model.Pod{Namespace: se.Namespace, Labels: wle.GetLabels()}, o.WaypointReady).Waypoint
		}
		w := &workload.Workload{
			Uid:                   cluster + "/networking.istio.io/ServiceEntry/" + se.Namespace + "/" + se.Name + "/" + wle.GetAddress(),
			Name:                  se.Name,
			Namespace:             se.Namespace,
			Network:               wle.GetNetwork(),
			ClusterId:             cluster,
			ServiceAccount:        wle.GetServiceAccount(),
			Services:              entryEndpointServices(wle, served),
			AuthorizationPolicies: policies,
			Status:                workload.WorkloadStatus_HEALTHY,
			Waypoint:              GatewayAddress(wp),
			Locality:              entryLocality(wle.GetLocality()),
			WorkloadName:          se.Name,
			WorkloadType:          workload.WorkloadType_POD,
		}
		if td := m.Mesh.Domain(); td != model.DefaultTrustDomain {
			w.TrustDomain = td
		}
		if wle.GetWeight() > 0 {
			w.Capacity = wrapperspb.UInt32(wle.GetWeight())
		}
		if a, err := netip.ParseAddr(wle.GetAddress()); err == nil {
			w.Addresses = [][]byte{a.AsSlice()}
		} else {
			w.Hostname = wle.GetAddress()
		}
		w.CanonicalName, w.CanonicalRevision = CanonicalService(nil, w.WorkloadName)
		out = append(out, w)
	}
	return out
}

// entryEndpointServices is a ServiceEntry endpoint's services map: each port's target
// is the endpoint's port of the service port's name, else the service's target port.
func entryEndpointServices(wle *networking.WorkloadEntry, svcs []*wdsService) map[string]*workload.PortList {
	out := map[string]*workload.PortList{}
	for _, s := range svcs {
		pl := &workload.PortList{}
		for _, port := range s.svc.Ports {
			target := port.TargetPort
			if name, ok := s.portNames[port.ServicePort]; ok {
				if tv, ok := wle.GetPorts()[name]; ok {
					target = tv
				} else if target == 0 {
					target = port.ServicePort
				}
			}
			pl.Ports = append(pl.Ports, &workload.Port{ServicePort: port.ServicePort, TargetPort: target})
		}
		out[s.namespace+"/"+s.svc.Hostname] = pl
	}
	return out
}

// entryLocality parses a WorkloadEntry's locality, region/zone/subzone (nil when empty).
func entryLocality(s string) *workload.Locality {
	if s == "" {
		return nil
	}
	parts := append(strings.SplitN(s, "/", 3), "", "")
	if parts[0] == "" && parts[1] == "" && parts[2] == "" {
		return nil
	}
	return &workload.Locality{Region: parts[0], Zone: parts[1], Subzone: parts[2]}
}

// AddressName returns the resource name of a WDS address as istiod names it: a
// workload's uid, a service's "<namespace>/<hostname>".
func AddressName(a *workload.Address) string {
	if w := a.GetWorkload(); w != nil {
		return w.GetUid()
	}
	s := a.GetService()
	return s.GetNamespace() + "/" + s.GetHostname()
}

// AddressAliases returns the other names of a WDS address, "<network>/<ip>" per address
// ("<network>/<ip>/<length>" for a service's CIDR), which an on-demand ztunnel subscribes
// to; istiod reports them as Resource.aliases on on-demand streams only.
func AddressAliases(a *workload.Address) []string {
	var out []string
	if w := a.GetWorkload(); w != nil {
		for _, b := range w.GetAddresses() {
			ip, _ := netip.AddrFromSlice(b)
			out = append(out, w.GetNetwork()+"/"+ip.String())
		}
		return out
	}
	for _, na := range a.GetService().GetAddresses() {
		ip, _ := netip.AddrFromSlice(na.GetAddress())
		alias := na.GetNetwork() + "/" + ip.String()
		if na.Length != nil {
			alias += "/" + strconv.FormatUint(uint64(na.GetLength()), 10)
		}
		out = append(out, alias)
	}
	return out
}

// PodUID returns the WDS uid of pod namespace/name: "<cluster>//Pod/<ns>/<name>".
func PodUID(clusterID, namespace, name string) string {
	return cmp.Or(clusterID, DefaultClusterID) + "//Pod/" + namespace + "/" + name
}

// podWorkload returns pod p's Workload as istiod's podWorkloadBuilder makes it, or nil
// for a pod without an IP. svcs holds the WDS services that have a selector
// (wdsServices).
func podWorkload(m *model.Model, p *model.Pod, svcs selectorIndex, o WDSOptions) *workload.Workload {
	if !p.IP.IsValid() {
		return nil
	}
	cluster := cmp.Or(o.ClusterID, DefaultClusterID)
	w := &workload.Workload{
		Uid:                   PodUID(cluster, p.Namespace, p.Name),
		Name:                  p.Name,
		Namespace:             p.Namespace,
		Addresses:             [][]byte{p.IP.AsSlice()},
		ServiceAccount:        p.ServiceAccount,
		Node:                  o.Node,
		ClusterId:             cluster,
		Services:              podServices(p, svcs),
		AuthorizationPolicies: workloadPolicies(m, p),
		Status:                workload.WorkloadStatus_HEALTHY,
		Waypoint:              GatewayAddress(m.WaypointOfWorkload(p, o.WaypointReady).Waypoint),
		WorkloadName:          cmp.Or(p.Workload, p.Name),
		WorkloadType:          workload.WorkloadType_POD,
	}
	if td := m.Mesh.Domain(); td != model.DefaultTrustDomain {
		w.TrustDomain = td // istiod elides the default trust domain (pickTrustDomain)
	}
	if o.Unhealthy != nil && o.Unhealthy(p) {
		w.Status = workload.WorkloadStatus_UNHEALTHY
	}
	w.CanonicalName, w.CanonicalRevision = CanonicalService(p.Labels, w.WorkloadName)
	if p.AmbientRedirected() {
		w.TunnelProtocol = workload.TunnelProtocol_HBONE
	}
	if slices.Contains(strings.Split(p.Labels[tunnelLabel], ","), "http") {
		w.TunnelProtocol, w.NativeTunnel = workload.TunnelProtocol_HBONE, true
	}
	return w
}

// GatewayAddress returns the WDS address of waypoint w (nil for none) as istiod writes
// it from the Gateway's status: the waypoint Service's hostname in its namespace (istiod
// prefers a hostname address to an IP, and Istio's deployment controller reports both
// for the istio-waypoint class) and the HBONE port 15008.
func GatewayAddress(w *model.Waypoint) *workload.GatewayAddress {
	if w == nil {
		return nil
	}
	return &workload.GatewayAddress{
		Destination: &workload.GatewayAddress_Hostname{Hostname: &workload.NamespacedHostname{
			Namespace: w.Namespace, Hostname: w.Hostname(),
		}},
		HboneMtlsPort: model.WaypointPort,
	}
}

// CanonicalService returns a workload's canonical service name and revision as Istio's
// kubelabels.CanonicalService: the first of service.istio.io/canonical-name,
// app.kubernetes.io/name and app, else the workload's name; the first of
// service.istio.io/canonical-revision, app.kubernetes.io/version and version, else
// "latest".
func CanonicalService(labels map[string]string, workloadName string) (string, string) {
	name, rev := workloadName, "latest"
	for _, k := range []string{canonicalNameLabel, "app.kubernetes.io/name", "app"} {
		if v, ok := labels[k]; ok {
			name = v
			break
		}
	}
	for _, k := range []string{canonicalRevisionLabel, "app.kubernetes.io/version", "version"} {
		if v, ok := labels[k]; ok {
			rev = v
			break
		}
	}
	return name, rev
}

// wdsService is one WDS Service with what a pod's services map needs of its source.
type wdsService struct {
	svc       *workload.Service
	namespace string
	// selector picks the pods of namespace whose services map names the service: a
	// Service's selector, a ServiceEntry's workloadSelector (nil: none).
	selector map[string]string
	// entry is the ServiceEntry the service is of (nil for a Service), and portNames
	// its ports' names by number.
	entry     *model.IstioConfig[*networking.ServiceEntry]
	portNames map[uint32]string
}

// podServices returns the pod's services map: every service of its namespace whose
// non-empty selector matches the pod, keyed "<namespace>/<hostname>", with the service
// and target ports (istiod leaves the app protocol to the Service).
func podServices(p *model.Pod, svcs selectorIndex) map[string]*workload.PortList {
	out := map[string]*workload.PortList{}
	for _, s := range svcs.candidates(p) {
		if !labelsMatch(s.selector, p.Labels) {
			continue
		}
		pl := &workload.PortList{Ports: make([]*workload.Port, 0, len(s.svc.Ports))}
		for _, port := range s.svc.Ports {
			pl.Ports = append(pl.Ports, &workload.Port{ServicePort: port.ServicePort, TargetPort: port.TargetPort})
		}
		out[s.namespace+"/"+s.svc.Hostname] = pl
	}
	return out
}

// selectorIndex files each service that has a selector under one label of it (its
// namespace, the selector's first key and its value), so that a pod is tried only against
// the services filed under its own labels: trying every service of the namespace on
// every pod cost a 1000-pod lab of 500 Services half a million selector comparisons per
// WDS push, most of the lab's CPU at `up`.
type selectorIndex map[selectorKey][]*wdsService

type selectorKey struct{ namespace, key, value string }

func (x selectorIndex) add(s *wdsService) {
	if len(s.selector) == 0 {
		return
	}
	first := slices.Min(slices.Collect(maps.Keys(s.selector)))
	k := selectorKey{s.namespace, first, s.selector[first]}
	x[k] = append(x[k], s)
}

// candidates returns the services whose selector may match p's labels, each once (a
// service is filed under one key, which p has one value of).
func (x selectorIndex) candidates(p *model.Pod) []*wdsService {
	var out []*wdsService
	for k, v := range p.Labels {
		out = append(out, x[selectorKey{p.Namespace, k, v}]...)
	}
	return out
}

// wdsServices returns the WDS Services of m sorted by resource name: every Kubernetes
// Service (canonical), and a Service per ServiceEntry host. As istiod, a hostname keeps
// one service per namespace (a Kubernetes Service wins, else the oldest ServiceEntry:
// meshlab has no creation times, so the first in model order), and one of them across
// namespaces is canonical: the Kubernetes Service, else the first ServiceEntry.
func wdsServices(m *model.Model, o WDSOptions) []*wdsService {
	var all []*wdsService
	for _, s := range m.Services {
		ws := kubeService(s)
		ws.svc.Waypoint = GatewayAddress(m.WaypointOfService(s.Namespace, s.Labels, o.WaypointReady).Waypoint)
		all = append(all, ws)
	}
	kube := len(all)
	for _, se := range m.Istio.ServiceEntries {
		wp := GatewayAddress(m.WaypointOfService(se.Namespace, se.Labels, o.WaypointReady).Waypoint)
		for _, ws := range serviceEntryServices(m, se) {
			ws.svc.Waypoint = wp
			all = append(all, ws)
		}
	}
	// Keep one per (namespace, hostname); Kubernetes Services come first, so they win.
	seen := map[string]bool{}
	hasCanonical := map[string]bool{}
	out := make([]*wdsService, 0, len(all))
	for i, s := range all {
		key := s.namespace + "/" + s.svc.Hostname
		if seen[key] {
			continue
		}
		seen[key] = true
		if i < kube {
			hasCanonical[s.svc.Hostname] = true
		}
		out = append(out, s)
	}
	for _, s := range out[kube:] {
		if !hasCanonical[s.svc.Hostname] {
			hasCanonical[s.svc.Hostname] = true
			s.svc.Canonical = true
		}
	}
	slices.SortFunc(out, func(a, b *wdsService) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.svc.Hostname, b.svc.Hostname))
	})
	return out
}

// kubeService returns a Kubernetes Service's WDS form (istiod's constructService): its
// cluster IP on the default network, each port's app protocol classified as Istio
// classifies a Kubernetes port, IPv4 only (the lab's Services are single-stack IPv4, as
// the API server records them), canonical.
func kubeService(s *model.Service) *wdsService {
	ws := &workload.Service{
		Name:       s.Name,
		Namespace:  s.Namespace,
		Hostname:   s.Hostname(),
		IpFamilies: workload.IPFamilies_IPV4_ONLY,
		Canonical:  true,
	}
	if s.VIP.IsValid() {
		ws.Addresses = []*workload.NetworkAddress{{Address: s.VIP.AsSlice()}}
		if s.VIP.Is6() {
			ws.IpFamilies = workload.IPFamilies_IPV6_ONLY
		}
	}
	for _, p := range s.Ports {
		ws.Ports = append(ws.Ports, &workload.Port{
			ServicePort: uint32(p.Port),
			TargetPort:  uint32(p.TargetPort),
			AppProtocol: kubeAppProtocol(p),
		})
	}
	return &wdsService{svc: ws, namespace: s.Namespace, selector: s.Selector}
}

// serviceEntryServices returns a ServiceEntry's WDS Services, one per host (istiod's
// constructServiceEntries): its addresses (a CIDR keeps its length), its ports with the
// app protocol of their protocol field and the target port defaulted to the port, a
// passthrough load balancer for resolution NONE, its subject alt names. A ServiceEntry
// with an address that is neither an IP nor a CIDR has none (istiod drops it). A host
// of a ServiceEntry without addresses has the one istiod's IP autoallocator gave it
// (model.AutoAllocates), as istiod's ambient index reads it from the status.
func serviceEntryServices(m *model.Model, se *model.IstioConfig[*networking.ServiceEntry]) []*wdsService {
	spec := se.Spec
	if spec == nil {
		return nil
	}
	var addrs []*workload.NetworkAddress
	for _, a := range spec.GetAddresses() {
		na, ok := networkAddress(a)
		if !ok {
			return nil
		}
		addrs = append(addrs, na)
	}
	ports := make([]*workload.Port, 0, len(spec.GetPorts()))
	for _, p := range spec.GetPorts() {
		ports = append(ports, &workload.Port{
			ServicePort: p.GetNumber(),
			TargetPort:  cmp.Or(p.GetTargetPort(), p.GetNumber()),
			AppProtocol: appProtocol(istioProtocol(p.GetProtocol())),
		})
	}
	var lb *workload.LoadBalancing
	if spec.GetResolution() == networking.ServiceEntry_NONE {
		lb = &workload.LoadBalancing{Mode: workload.LoadBalancing_PASSTHROUGH, HealthPolicy: workload.LoadBalancing_ALLOW_ALL}
	}
	names := map[uint32]string{}
	for _, p := range spec.GetPorts() {
		names[p.GetNumber()] = p.GetName()
	}
	out := make([]*wdsService, 0, len(spec.GetHosts()))
	for _, h := range spec.GetHosts() {
		hostAddrs := addrs
		if a, ok := m.Istio.AutoAddresses[model.EntryHost{Namespace: se.Namespace, Name: se.Name, Host: h}]; ok && len(addrs) == 0 {
			hostAddrs = []*workload.NetworkAddress{{Address: a.AsSlice()}}
		}
		out = append(out, &wdsService{
			svc: &workload.Service{
				Name:            se.Name,
				Namespace:       se.Namespace,
				Hostname:        h,
				Addresses:       hostAddrs,
				Ports:           ports,
				SubjectAltNames: spec.GetSubjectAltNames(),
				LoadBalancing:   lb,
			},
			namespace: se.Namespace,
			selector:  maps.Clone(spec.GetWorkloadSelector().GetLabels()),
			entry:     se,
			portNames: names,
		})
	}
	return out
}

// networkAddress parses a ServiceEntry address, an IP or a CIDR (masked), as istiod's
// toNetworkAddressFromCidr: a single IP has no length.
func networkAddress(s string) (*workload.NetworkAddress, bool) {
	var prefix netip.Prefix
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, false
		}
		prefix = p.Masked()
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, false
		}
		prefix = netip.PrefixFrom(a, a.BitLen())
	}
	na := &workload.NetworkAddress{Address: prefix.Addr().AsSlice()}
	if !prefix.IsSingleIP() {
		bits := uint32(prefix.Bits())
		na.Length = &bits
	}
	return na, true
}

// istioProtocol is Istio's protocol.Instance as far as WDS tells protocols apart.
type istioProtocol string

// wellKnownTCPPorts are the ports Istio takes for TCP when nothing names their protocol
// (SMTP, DNS, MySQL, MongoDB).
var wellKnownTCPPorts = []uint16{25, 53, 3306, 27017}

// kubeAppProtocol classifies a Kubernetes Service port as Istio's ConvertProtocol does
// (the appProtocol when set, else the port name's prefix; a well-known port is TCP) and
// returns its WDS app protocol.
func kubeAppProtocol(p model.ServicePort) workload.AppProtocol {
	name := p.Name
	if p.AppProtocol != "" {
		switch name = p.AppProtocol; name {
		case "kubernetes.io/h2c":
			return workload.AppProtocol_HTTP2
		case "kubernetes.io/ws":
			return workload.AppProtocol_HTTP11
		case "kubernetes.io/wss":
			return workload.AppProtocol_TLS
		}
	}
	if len(name) >= len("grpc-web") && strings.EqualFold(name[:len("grpc-web")], "grpc-web") {
		return workload.AppProtocol_UNKNOWN // GRPCWeb has no WDS app protocol
	}
	prefix, _, _ := strings.Cut(name, "-")
	proto := istioProtocol(strings.ToLower(prefix))
	if !slices.Contains(istioProtocols, proto) && slices.Contains(wellKnownTCPPorts, p.Port) {
		return workload.AppProtocol_TCP
	}
	return appProtocol(proto)
}

// istioProtocols are the protocol names Istio's protocol.Parse knows (lowercase).
var istioProtocols = []istioProtocol{"tcp", "udp", "grpc", "grpc-web", "http", "http_proxy", "http2", "https", "tls", "mongo", "redis", "mysql"}

// appProtocol maps an Istio protocol name (case-insensitive) to WDS's app protocol as
// istiod's toAppProtocolFromProtocol: the protocols WDS has no value for are UNKNOWN.
func appProtocol(p istioProtocol) workload.AppProtocol {
	switch strings.ToLower(string(p)) {
	case "http":
		return workload.AppProtocol_HTTP11
	case "http2":
		return workload.AppProtocol_HTTP2
	case "grpc":
		return workload.AppProtocol_GRPC
	case "tls", "https":
		return workload.AppProtocol_TLS
	case "tcp":
		return workload.AppProtocol_TCP
	}
	return workload.AppProtocol_UNKNOWN
}

package xds

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// A waypoint is the Envoy of ambient mode that applies L7 policy for the services (or
// workloads) that use it. istiod generates it a configuration of its own, in shapes no
// sidecar sees (pilot/pkg/networking/core/listener_waypoint.go, cluster_waypoint.go),
// which meshlab's generator follows resource for resource, held to istiod by the
// fidelity module's waypoint scenarios (docs/FIDELITY.md):
//
//   - connect_terminate: the only listener bound to a port (0.0.0.0:15008). It accepts
//     HBONE (mutual TLS 1.3, ALPN h2, HTTP/2 CONNECT) from ztunnels and sends each
//     CONNECT stream, the :authority (the VIP:port the client dialled) saved as the
//     original destination, to the internal listener main_internal;
//   - main_internal: an internal listener whose unified filter-chain matcher picks a
//     chain by that destination, one per service port, inbound-vip|<port>|http|<host>
//     (an HTTP connection manager routing to the service's cluster) or
//     inbound-vip|<port>|tcp|<host> (tcp_proxy); destinations no service matches take
//     direct-http or direct-tcp to the encap cluster;
//   - the inbound-vip clusters: EDS clusters whose endpoints are not addresses but the
//     internal listener connect_originate, each carrying the pod's address as the
//     original destination in its metadata (passed through by the internal upstream
//     transport);
//   - connect_originate: the internal listener (and ORIGINAL_DST cluster) that opens
//     HBONE to that pod's 15008, CONNECT to the pod's address and port.
//
// inner_connect_originate and outer_connect_originate are istiod's double-HBONE pair
// (to a service on another network through its east-west gateway); a one-host lab has a
// single network, and meshlab generates them only for the shape.
const (
	ConnectTerminateListener = "connect_terminate"
	MainInternalListener     = "main_internal"
	ConnectOriginateListener = "connect_originate"
	EncapCluster             = "encap"
	InnerConnectOriginate    = "inner_connect_originate"
	OuterConnectOriginate    = "outer_connect_originate"
	// HBONEPort is the port a waypoint (and every ambient pod's ztunnel) accepts HBONE on.
	HBONEPort = 15008
)

// WaypointSpec is the waypoint a configuration is generated for: its Gateway's name and
// namespace, the traffic it is for (istio.io/waypoint-for: service, workload, all, none)
// and the addresses of its pod and Service.
type WaypointSpec struct {
	Name, Namespace string
	For             string
	IP, VIP         netip.Addr
}

// InboundVIPClusterName is the name istiod gives a waypoint's chain and cluster for one
// service port: inbound-vip|<port>|<http or tcp>|<host>.
func InboundVIPClusterName(port uint16, protocol, host string) string {
	return fmt.Sprintf("inbound-vip|%d|%s|%s", port, protocol, host)
}

// waypointPort is one service port a waypoint serves.
type waypointPort struct {
	svc  *model.Service
	port model.ServicePort
}

func (p waypointPort) protocol() string {
	if p.port.Protocol.IsHTTPOrSniffed() {
		return "http"
	}
	return "tcp"
}

func (p waypointPort) name() string {
	return InboundVIPClusterName(p.port.Port, p.protocol(), p.svc.Hostname())
}

// WaypointServices returns the Kubernetes Services whose traffic waypoint w takes, sorted
// as istiod orders them: those model.WaypointOfService binds to w (the Service's own
// istio.io/use-waypoint, else its namespace's; none for the waypoint's own Service, or
// when w takes no service traffic).
func WaypointServices(m *model.Model, w WaypointSpec) []*model.Service {
	var out []*model.Service
	for _, s := range m.Services {
		b := m.WaypointOfService(s.Namespace, s.Labels, nil)
		if b.Waypoint != nil && b.Waypoint.Namespace == w.Namespace && b.Waypoint.Name == w.Name {
			out = append(out, s)
		}
	}
	// istiod orders them by creation time, then name, then namespace (a lab's objects have
	// no creation time).
	slices.SortFunc(out, func(a, b *model.Service) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Namespace, b.Namespace))
	})
	return append(out, waypointEntryServices(m, w)...)
}

// waypointEntryServices are the ServiceEntry hosts whose traffic waypoint w takes (the
// ServiceEntry's istio.io/use-waypoint, else its namespace's), each as a service of its
// own: Name and Namespace the ServiceEntry's, Host the host, VIP its address (its own or
// the autoallocated one), its ports. Only resolution DNS without endpoints is served, a
// cluster resolving the host itself, what an egress waypoint is for (istio.io's ambient
// egress page); the others take no waypoint chain.
func waypointEntryServices(m *model.Model, w WaypointSpec) []*model.Service {
	var out []*model.Service
	for _, se := range m.Istio.ServiceEntries {
		if se.Spec.GetResolution() != networking.ServiceEntry_DNS || len(se.Spec.GetEndpoints()) > 0 || se.Spec.GetWorkloadSelector() != nil {
			continue
		}
		b := m.WaypointOfService(se.Namespace, se.Labels, nil)
		if b.Waypoint == nil || b.Waypoint.Namespace != w.Namespace || b.Waypoint.Name != w.Name {
			continue
		}
		for _, h := range se.Spec.GetHosts() {
			vip, ok := m.EntryAddress(se, h)
			if !ok || strings.HasPrefix(h, "*") {
				continue
			}
			svc := &model.Service{Name: se.Name, Namespace: se.Namespace, Host: h, VIP: vip, Labels: se.Labels, Origin: se.Origin}
			for _, p := range se.Spec.GetPorts() {
				svc.Ports = append(svc.Ports, model.ServicePort{
					Name: p.GetName(), Port: uint16(p.GetNumber()), TargetPort: uint16(cmp.Or(p.GetTargetPort(), p.GetNumber())),
					Protocol: entryProtocol(p.GetProtocol()),
				})
			}
			out = append(out, svc)
		}
	}
	return out
}

// entryOf returns the ServiceEntry a waypoint's service was made of, nil for a
// Kubernetes Service.
func entryOf(m *model.Model, s *model.Service) *model.IstioConfig[*networking.ServiceEntry] {
	if s.Host == "" {
		return nil
	}
	for _, se := range m.Istio.ServiceEntries {
		if se.Namespace == s.Namespace && se.Name == s.Name {
			return se
		}
	}
	return nil
}

// WaypointWorkloads returns the addresses of the workloads whose workload-addressed
// traffic waypoint w takes, as istiod's WorkloadsForWaypoint: the WDS workloads whose
// waypoint is w (model.WaypointOfWorkload: a pod's or a ServiceEntry endpoint's
// istio.io/use-waypoint, else its namespace's, when w is for workload or all traffic),
// ordered by creation time (a lab's objects have none), then uid; a workload without an
// address (a DNS endpoint) has none.
func WaypointWorkloads(m *model.Model, w *model.Waypoint) []netip.Addr {
	type owned struct {
		uid  string
		addr netip.Addr
	}
	var out []owned
	for _, p := range m.Pods {
		if p.IP.IsValid() && m.WaypointOfWorkload(p, nil).Waypoint == w {
			out = append(out, owned{PodUID("", p.Namespace, p.Name), p.IP})
		}
	}
	if len(m.Istio.ServiceEntries) > 0 {
		o := WDSOptions{}
		svcs := wdsServices(m, o)
		for _, se := range m.Istio.ServiceEntries {
			for _, x := range serviceEntryWorkloads(m, se, svcs, o) {
				gw := x.GetWaypoint().GetHostname()
				if gw.GetNamespace() != w.Namespace || gw.GetHostname() != w.Hostname() {
					continue
				}
				for _, b := range x.GetAddresses() {
					if a, ok := netip.AddrFromSlice(b); ok {
						out = append(out, owned{x.GetUid(), a})
					}
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b owned) int { return strings.Compare(a.uid, b.uid) })
	addrs := make([]netip.Addr, len(out))
	for i, o := range out {
		addrs[i] = o.addr
	}
	return addrs
}

// servedHosts returns the services of ports by hostname.
func servedHosts(ports []waypointPort) map[string]*model.Service {
	served := map[string]*model.Service{}
	for _, p := range ports {
		served[p.svc.Hostname()] = p.svc
	}
	return served
}

// waypointPorts returns every port of the services, in service then port order.
func waypointPorts(svcs []*model.Service) []waypointPort {
	var out []waypointPort
	for _, s := range svcs {
		if !s.VIP.IsValid() {
			continue // a headless service has no VIP to send to a waypoint
		}
		for _, p := range s.Ports {
			out = append(out, waypointPort{svc: s, port: p})
		}
	}
	return out
}

// GenerateWaypoint returns waypoint w's resources, by type: its listeners, clusters, the
// endpoints of its inbound-vip clusters and the Secrets a DestinationRule's TLS
// origination names (routes are inline, as istiod's are; no RDS).
func GenerateWaypoint(m *model.Model, w WaypointSpec) (map[resource.Type][]types.Resource, error) {
	if m == nil {
		return nil, errors.New("generate waypoint: nil model")
	}
	fail := func(err error) error { return fmt.Errorf("generate waypoint %s/%s: %w", w.Namespace, w.Name, err) }
	ports := waypointPorts(WaypointServices(m, w))
	wp := m.Waypoint(w.Namespace, w.Name)
	if wp == nil {
		return nil, fail(errors.New("no such waypoint in the model"))
	}
	ls, err := waypointListeners(m, wp, ports)
	if err != nil {
		return nil, fail(err)
	}
	vips := waypointVIPClusters(m, w, ports)
	cs, err := waypointClusters(m, w, vips, m.Mesh.TrustDomains())
	if err != nil {
		return nil, fail(err)
	}
	outCs, outEps, err := waypointOutbound(m, w, waypointOutboundHosts(m, servedHosts(ports))) // waypoint_outbound.go
	if err != nil {
		return nil, fail(err)
	}
	out := map[resource.Type][]types.Resource{
		resource.ListenerType: ls,
		resource.ClusterType:  append(cs, outCs...),
		resource.EndpointType: append(waypointEndpoints(m, vips), outEps...),
		// the Secrets its clusters' TLS origination names (transportsocket.go)
		resource.SecretType: withOriginationSecrets(nil, m, w.Namespace),
	}
	for typ, rs := range out {
		if err := validateAll(rs); err != nil {
			return nil, fail(fmt.Errorf("%s: %w", typ, err))
		}
	}
	return out, nil
}

// WaypointOf returns the waypoint pod runs (model.Pod.Waypoint), with its pod's and its
// Service's addresses; ok is false for any other pod.
func WaypointOf(m *model.Model, pod *model.Pod) (w WaypointSpec, ok bool) {
	wp := m.WaypointOfPod(pod)
	if wp == nil {
		return WaypointSpec{}, false
	}
	w = WaypointSpec{Name: wp.Name, Namespace: wp.Namespace, For: wp.For, IP: pod.IP}
	if s := m.WaypointService(wp); s != nil {
		w.VIP = s.VIP
	}
	return w, true
}

// generateWaypointTypes is GenerateWaypoint's resources of the types typs (every type of
// GeneratedTypes is present: a waypoint has no routes of its own).
func generateWaypointTypes(m *model.Model, w WaypointSpec, typs ...resource.Type) (map[resource.Type][]types.Resource, error) {
	all, err := GenerateWaypoint(m, w)
	if err != nil {
		return nil, err
	}
	out := make(map[resource.Type][]types.Resource, len(typs))
	for _, t := range typs {
		rs := all[t]
		if rs == nil {
			rs = []types.Resource{}
		}
		slices.SortStableFunc(rs, func(a, b types.Resource) int {
			return strings.Compare(cachev3.GetResourceName(a), cachev3.GetResourceName(b))
		})
		out[t] = rs
	}
	return out, nil
}

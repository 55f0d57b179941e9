package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// registry is what Istio objects may name: the hosts of Services and ServiceEntries, and
// pods.
type registry struct {
	services map[string]*model.Service // by FQDN
	entries  map[string]*Object        // ServiceEntry by resolved host
	pods     map[string]bool           // pod names
}

func newRegistry(objs []*Object) *registry {
	r := &registry{services: map[string]*model.Service{}, entries: map[string]*Object{}, pods: map[string]bool{}}
	for _, o := range objs {
		if o.svc != nil {
			r.services[o.svc.Hostname()] = o.svc
		}
		for _, p := range o.pods {
			r.pods[p.Name] = true
		}
	}
	// The gateway Services istioctl's profile brings for the Gateways (the egress gateway
	// task routes sidecars to istio-egressgateway.istio-system.svc.cluster.local); a
	// clash with a user object is reported by the build.
	if svcs, pods, err := gatewayDeployments(objs); err == nil {
		for _, s := range svcs {
			r.services[s.Hostname()] = s
		}
		for _, p := range pods {
			r.pods[p.Name] = true
		}
	}
	return r
}

// lookup resolves host, written in namespace ns, to the FQDN of a Service or a
// ServiceEntry host.
func (r *registry) lookup(host, ns string) (string, bool) {
	for _, c := range model.HostCandidates(host, ns) {
		if r.services[c] != nil || r.entries[c] != nil {
			return c, true
		}
	}
	return "", false
}

// hasPort reports whether the Service or ServiceEntry at fqdn has port n.
func (r *registry) hasPort(fqdn string, n uint32) bool {
	if s := r.services[fqdn]; s != nil {
		return slices.ContainsFunc(s.Ports, func(p model.ServicePort) bool { return uint32(p.Port) == n })
	}
	if o := r.entries[fqdn]; o != nil {
		return slices.ContainsFunc(o.ServiceEntry.GetPorts(), func(p *networking.ServicePort) bool { return p.GetNumber() == n })
	}
	return false
}

// checkIstioRefs records the problems between Istio objects and the rest: hosts naming
// no Service or ServiceEntry, ports a service does not have, ServiceEntry endpoints naming
// no pod or Service, and clashes. objs are sorted by document.
//
// What Istio accepts is accepted here too, so that its behaviour can be reproduced: a
// DestinationRule for a host no Service or ServiceEntry has (it applies to nothing),
// several DestinationRules for one host (merged, as in istiod), a
// route to a subset no DestinationRule defines (its cluster does not exist: 503 at run
// time), several VirtualServices for one host (one wins, as in istiod; see
// xds.virtualServiceFor), and a VirtualService whose hosts or destinations name no
// Service or ServiceEntry (deleted before it, in any order, as Kubernetes deletes them:
// its routes lead to a cluster that does not exist, 503 with NC, as istiod's do). meshlab
// analyze reports them as istioctl analyze does.
func checkIstioRefs(objs []*Object, errs *ErrorList) {
	r := newRegistry(objs)
	prob := func(o *Object) problems { return problems{origin: o.Origin, doc: o.Doc, item: o.Item, list: errs} }
	var mesh *Object
	for _, o := range objs {
		if o.MeshConfig == nil {
			continue
		}
		if mesh != nil {
			prob(o).addf("", "a lab has one MeshConfig; %s is already one", mesh.Origin)
		}
		mesh = o
	}
	checkMeshWidePeerAuthentication(objs, errs)
	for _, o := range objs {
		if o.ServiceEntry == nil {
			continue
		}
		for i, h := range o.ServiceEntry.GetHosts() {
			fqdn := model.HostCandidates(h, o.Origin.Namespace)[0]
			switch {
			case r.services[fqdn] != nil:
				prob(o).addf(fmt.Sprintf("spec.hosts[%d]", i), "%q is already the Service %s", h, r.services[fqdn].Origin)
			case r.entries[fqdn] != nil:
				prob(o).addf(fmt.Sprintf("spec.hosts[%d]", i), "%q is already a host of %s", h, r.entries[fqdn].Origin)
			default:
				r.entries[fqdn] = o
			}
		}
		for i, ep := range o.ServiceEntry.GetEndpoints() {
			f := fmt.Sprintf("spec.endpoints[%d].address", i)
			a := ep.GetAddress()
			switch o.ServiceEntry.GetResolution() {
			case networking.ServiceEntry_STATIC:
				if _, err := netip.ParseAddr(a); err != nil && !r.pods[a] {
					prob(o).addf(f, "%q is neither the name nor the IP of a lab pod", a)
				}
			case networking.ServiceEntry_DNS:
				if o.ServiceEntry.GetLocation() == networking.ServiceEntry_MESH_EXTERNAL {
					break // a name of the outside world, resolved by the lab's DNS as a real one would be
				}
				if fqdn, ok := r.lookup(a, o.Origin.Namespace); !ok || r.services[fqdn] == nil {
					prob(o).addf(f, "%q names no Service of the lab (resolution DNS resolves lab Service names)", a)
				}
			}
		}
	}
	for _, o := range objs {
		if o.DestinationRule == nil {
			continue
		}
		// Several rules for one host in a namespace are merged, as istiod merges them (see
		// xds.destinationRuleFor).
		fqdn, ok := r.lookup(o.DestinationRule.GetHost(), o.Origin.Namespace)
		if !ok {
			continue // Istio accepts it; it configures no cluster (analyze: IST0174)
		}
		checkPolicyPorts(r, fqdn, o.DestinationRule.GetTrafficPolicy(), "spec.trafficPolicy", prob(o))
		for i, s := range o.DestinationRule.GetSubsets() {
			checkPolicyPorts(r, fqdn, s.GetTrafficPolicy(), fmt.Sprintf("spec.subsets[%d].trafficPolicy", i), prob(o))
		}
	}
	for _, o := range objs {
		vs := o.VirtualService
		if vs == nil {
			continue
		}
		p := prob(o)
		for i, hr := range vs.GetHttp() {
			for j, rd := range hr.GetRoute() {
				checkDestinationRef(r, rd.GetDestination(), o.Origin.Namespace, fmt.Sprintf("spec.http[%d].route[%d].destination", i, j), p)
			}
			if hr.GetMirror() != nil {
				checkDestinationRef(r, hr.GetMirror(), o.Origin.Namespace, fmt.Sprintf("spec.http[%d].mirror", i), p)
			}
			for j, mp := range hr.GetMirrors() {
				checkDestinationRef(r, mp.GetDestination(), o.Origin.Namespace, fmt.Sprintf("spec.http[%d].mirrors[%d].destination", i, j), p)
			}
		}
		for i, tr := range vs.GetTcp() {
			for j, rd := range tr.GetRoute() {
				checkDestinationRef(r, rd.GetDestination(), o.Origin.Namespace, fmt.Sprintf("spec.tcp[%d].route[%d].destination", i, j), p)
			}
		}
		for i, tr := range vs.GetTls() {
			for j, rd := range tr.GetRoute() {
				checkDestinationRef(r, rd.GetDestination(), o.Origin.Namespace, fmt.Sprintf("spec.tls[%d].route[%d].destination", i, j), p)
			}
		}
	}
}

func checkDestinationRef(r *registry, d *networking.Destination, ns, f string, p problems) {
	if d.GetHost() == "" {
		return // already refused
	}
	fqdn, ok := r.lookup(d.GetHost(), ns)
	if !ok {
		return // accepted, as Kubernetes and istiod accept it: a route to no cluster (503 NC; analyze: IST0101)
	}
	if d.GetPort() != nil && !r.hasPort(fqdn, d.GetPort().GetNumber()) {
		p.addf(f+".port.number", "%d is not a port of %s", d.GetPort().GetNumber(), fqdn)
	}
}

func checkPolicyPorts(r *registry, fqdn string, tp *networking.TrafficPolicy, f string, p problems) {
	for i, pl := range tp.GetPortLevelSettings() {
		if n := pl.GetPort().GetNumber(); n != 0 && !r.hasPort(fqdn, n) {
			p.addf(fmt.Sprintf("%s.portLevelSettings[%d].port.number", f, i), "%d is not a port of %s", n, fqdn)
		}
	}
}

// istioModel returns the model form of the objects' Istio config: copies of the specs with
// every host resolved to the FQDN of its Service or ServiceEntry host (as istiod resolves
// short names before generating config), and STATIC ServiceEntry endpoints naming a pod
// replaced by the pod's IP. m's pods must have their addresses.
func istioModel(objs []*Object, m *model.Model) (model.Istio, model.MeshConfig, error) {
	var out model.Istio
	var mesh model.MeshConfig
	objs = append(slices.Clip(objs), gatewayAPIIstio(objs)...) // as istiod converts the Gateway API
	objs = append(objs, ingressIstio(objs)...)                 // and Kubernetes Ingress
	objs = append(objs, externalNameIstio(m)...)               // and ExternalName Services
	r := newRegistry(objs)
	for _, o := range objs {
		if o.ServiceEntry != nil {
			for _, h := range o.ServiceEntry.GetHosts() {
				r.entries[model.HostCandidates(h, o.Origin.Namespace)[0]] = o
			}
		}
	}
	resolve := func(h, ns string) string {
		if fqdn, ok := r.lookup(h, ns); ok {
			return fqdn
		}
		return h // a gateway's host ("*", a client's name) or a name of nothing
	}
	resolveDest := func(d *networking.Destination, ns string) {
		if d == nil {
			return
		}
		if fqdn, ok := r.lookup(d.GetHost(), ns); ok {
			d.Host = fqdn
		} else if d.GetHost() != "" {
			d.Host = model.HostCandidates(d.GetHost(), ns)[0] // a name of nothing, made an FQDN as istiod makes it
		}
	}
	podIPs := map[string]netip.Addr{}
	known := map[netip.Addr]bool{}
	for _, p := range m.Pods {
		podIPs[p.Name] = p.IP
		known[p.IP] = true
	}
	for _, o := range objs {
		ns := o.Origin.Namespace
		switch {
		case o.VirtualService != nil:
			vs := proto.Clone(o.VirtualService).(*networking.VirtualService)
			for i, h := range vs.Hosts {
				vs.Hosts[i] = resolve(h, ns)
			}
			for _, hr := range vs.Http {
				for _, rd := range hr.Route {
					resolveDest(rd.Destination, ns)
				}
				resolveDest(hr.Mirror, ns)
				for _, mp := range hr.Mirrors {
					resolveDest(mp.Destination, ns)
				}
			}
			for _, tr := range vs.Tcp {
				for _, rd := range tr.Route {
					resolveDest(rd.Destination, ns)
				}
			}
			for _, tr := range vs.Tls {
				for _, rd := range tr.Route {
					resolveDest(rd.Destination, ns)
				}
			}
			out.VirtualServices = append(out.VirtualServices, &model.IstioConfig[*networking.VirtualService]{Name: o.Origin.Name, Namespace: ns, Spec: vs, Origin: o.Origin})
		case o.DestinationRule != nil:
			dr := proto.Clone(o.DestinationRule).(*networking.DestinationRule)
			dr.Host = resolve(dr.Host, ns)
			out.DestinationRules = append(out.DestinationRules, &model.IstioConfig[*networking.DestinationRule]{Name: o.Origin.Name, Namespace: ns, Spec: dr, Origin: o.Origin})
		case o.ServiceEntry != nil:
			se := proto.Clone(o.ServiceEntry).(*networking.ServiceEntry)
			for i, h := range se.Hosts {
				se.Hosts[i] = model.HostCandidates(h, ns)[0]
			}
			for i, a := range se.Addresses {
				// A /32 names one address (the http-proxy task's "$PROXY_IP/32"): the
				// model holds the address, as istiod's listener for it is the address's.
				if p, err := netip.ParsePrefix(a); err == nil && p.IsSingleIP() {
					se.Addresses[i] = p.Addr().String()
				}
			}
			for i, ep := range se.Endpoints {
				switch se.Resolution {
				case networking.ServiceEntry_STATIC:
					if ip, ok := podIPs[ep.Address]; ok {
						ep.Address = ip.String()
					} else if a, err := netip.ParseAddr(ep.Address); err != nil || (!known[a] && !a.IsLoopback()) {
						// A loopback endpoint is each proxy's own (secure-metrics' legacy
						// gateway-admin ServiceEntry, 127.0.0.1:15020): Envoy connects to it
						// in the pod's own network namespace.
						return out, mesh, fmt.Errorf("%s: spec.endpoints[%d].address: %q is not the IP of a lab pod (nor a loopback address, each proxy's own)", o.Origin, i, ep.Address)
					}
				case networking.ServiceEntry_DNS:
					ep.Address = resolve(ep.Address, ns)
				}
			}
			out.ServiceEntries = append(out.ServiceEntries, &model.IstioConfig[*networking.ServiceEntry]{Name: o.Origin.Name, Namespace: ns, Spec: se, Origin: o.Origin, Labels: objectLabels(o)})
		case o.Gateway != nil:
			out.Gateways = append(out.Gateways, &model.IstioConfig[*networking.Gateway]{Name: o.Origin.Name, Namespace: ns, Spec: proto.Clone(o.Gateway).(*networking.Gateway), Origin: o.Origin})
		case o.MeshConfig != nil:
			if o.MeshConfig.GetOutboundTrafficPolicy() != nil && o.MeshConfig.GetOutboundTrafficPolicy().GetMode() == 0 {
				mesh.OutboundTrafficPolicy = model.RegistryOnly
			}
			mesh.RootNamespace = o.MeshConfig.GetRootNamespace()
			mesh.TrustDomain = o.MeshConfig.GetTrustDomain()
			mesh.TrustDomainAliases = slices.Clone(o.MeshConfig.GetTrustDomainAliases())
			mesh.MeshMTLSMinTLS13 = o.MeshConfig.GetMeshMTLS().GetMinProtocolVersion() == meshv1alpha1.MeshConfig_TLSConfig_TLSV1_3
			for _, c := range o.MeshConfig.GetCertificates() { //nolint:staticcheck // deprecated in Istio; the DNS certificates page sets it
				mesh.DNSCertificates = append(mesh.DNSCertificates, model.DNSCertificate{SecretName: c.GetSecretName(), DNSNames: slices.Clone(c.GetDnsNames())})
			}
			accessLogModel(o, &mesh)
			tracingModel(o, &mesh)
			accessLogProvidersModel(o, &mesh) // meshconfig_otelals.go
			mesh.TLSOnSidecarIngress = installedPilotEnv(o)[PilotEnvTLSOnSidecarIngress] == "true"
		case o.PeerAuthentication != nil:
			out.PeerAuthentications = append(out.PeerAuthentications, peerAuthenticationModel(o))
		case o.AuthorizationPolicy != nil:
			out.AuthorizationPolicies = append(out.AuthorizationPolicies, authorizationPolicyModel(o))
		case o.RequestAuthentication != nil:
			out.RequestAuthentications = append(out.RequestAuthentications, requestAuthenticationModel(o))
		case o.Telemetry != nil:
			out.Telemetries = append(out.Telemetries, telemetryModel(o))
		case o.Sidecar != nil:
			out.Sidecars = append(out.Sidecars, sidecarModel(o))
		case o.TrafficExtension != nil:
			out.TrafficExtensions = append(out.TrafficExtensions, trafficExtensionModel(o))
		}
	}
	sortIstio(out.VirtualServices)
	sortIstio(out.DestinationRules)
	sortIstio(out.ServiceEntries)
	sortIstio(out.Gateways)
	sortIstio(out.PeerAuthentications)
	sortIstio(out.AuthorizationPolicies)
	sortIstio(out.RequestAuthentications)
	sortIstio(out.Telemetries)
	sortIstio(out.Sidecars)
	sortIstio(out.TrafficExtensions)
	return out, mesh, nil
}

func sortIstio[T any](l []*model.IstioConfig[T]) {
	slices.SortFunc(l, func(a, b *model.IstioConfig[T]) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

package config

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meshlab/meshlab/controlplane/model"
)

// validateService checks a decoded Service and returns its model form (without a VIP),
// or nil after recording its problems.
func validateService(s *corev1.Service, p problems) *model.Service {
	n := len(*p.list)
	checkName(p, "metadata.name", s.Name, 63)
	if s.Name != "" && (s.Name[0] < 'a' || s.Name[0] > 'z') {
		p.addf("metadata.name", "%q must start with a letter, as a Service name does in Kubernetes", s.Name)
	}
	checkName(p, "metadata.namespace", p.origin.Namespace, 63)
	checkServiceSpec(&s.Spec, p)
	checkUseWaypoint(s.Labels, "metadata.labels", p) // waypoint.go
	ports := servicePorts(s.Spec.Ports, p)
	if s.Spec.Type == corev1.ServiceTypeExternalName {
		checkExternalName(&s.Spec, p)
		return nil // an alias, not a model Service (externalNamesOf)
	}
	if len(s.Spec.Selector) == 0 {
		p.addf("spec.selector", "%s", "is required (meshlab has no manually managed Endpoints: a lab's Service selects its pods; for addresses outside them use a ServiceEntry, resolution STATIC with those endpoints or DNS with a host of the lab's outside world, or an ExternalName Service)")
	}
	if len(*p.list) > n {
		return nil
	}
	return &model.Service{
		Name:      s.Name,
		Namespace: p.origin.Namespace,
		Ports:     ports,
		Selector:  maps.Clone(s.Spec.Selector),
		Labels:    maps.Clone(s.Labels),
		Origin:    p.origin,
	}
}

// checkServiceSpec refuses, by name, the spec fields meshlab cannot honour when they hold
// anything but their default. Fields that do not change a ClusterIP service's behaviour
// inside a mesh (clusterIP, ipFamilies IPv4, publishNotReadyAddresses...) are accepted.
func checkServiceSpec(spec *corev1.ServiceSpec, p problems) {
	if spec.Type != "" && spec.Type != corev1.ServiceTypeClusterIP && spec.Type != corev1.ServiceTypeExternalName {
		p.addf("spec.type", "%s is not supported (meshlab has ClusterIP and ExternalName services)", spec.Type)
	}
	if spec.ClusterIP == corev1.ClusterIPNone {
		p.addf("spec.clusterIP", "None (a headless service) is not supported")
	}
	for i, ip := range spec.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			p.addf(fmt.Sprintf("spec.clusterIPs[%d]", i), "None (a headless service) is not supported")
		}
	}
	if spec.ExternalName != "" && spec.Type != corev1.ServiceTypeExternalName {
		p.addf("spec.externalName", "is read with type ExternalName only (the type here is %s)", cmp.Or(string(spec.Type), "ClusterIP"))
	}
	if len(spec.ExternalIPs) > 0 {
		p.addf("spec.externalIPs", "is not supported (nothing reaches a lab from outside)")
	}
	if spec.LoadBalancerIP != "" {
		p.addf("spec.loadBalancerIP", "is not supported (meshlab has no load balancers)")
	}
	if len(spec.LoadBalancerSourceRanges) > 0 {
		p.addf("spec.loadBalancerSourceRanges", "is not supported (meshlab has no load balancers)")
	}
	if spec.LoadBalancerClass != nil {
		p.addf("spec.loadBalancerClass", "is not supported (meshlab has no load balancers)")
	}
	if spec.AllocateLoadBalancerNodePorts != nil {
		p.addf("spec.allocateLoadBalancerNodePorts", "is not supported (meshlab has no load balancers)")
	}
	if spec.ExternalTrafficPolicy != "" {
		p.addf("spec.externalTrafficPolicy", "is not supported (it applies to NodePort and LoadBalancer services only)")
	}
	if spec.HealthCheckNodePort != 0 {
		p.addf("spec.healthCheckNodePort", "is not supported (it applies to LoadBalancer services only)")
	}
	if spec.SessionAffinity != "" && spec.SessionAffinity != corev1.ServiceAffinityNone {
		p.addf("spec.sessionAffinity", "%s is not supported (only None)", spec.SessionAffinity)
	}
	if spec.SessionAffinityConfig != nil && spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		p.addf("spec.sessionAffinityConfig", "is not supported (sessionAffinity ClientIP is not)")
	}
	if spec.InternalTrafficPolicy != nil && *spec.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyCluster {
		p.addf("spec.internalTrafficPolicy", "%s is not supported (only Cluster)", *spec.InternalTrafficPolicy)
	}
	for i, f := range spec.IPFamilies {
		if f != corev1.IPv4Protocol {
			p.addf(fmt.Sprintf("spec.ipFamilies[%d]", i), "%s is not supported (only IPv4)", f)
		}
	}
	if spec.IPFamilyPolicy != nil && *spec.IPFamilyPolicy == corev1.IPFamilyPolicyRequireDualStack {
		p.addf("spec.ipFamilyPolicy", "%s is not supported (meshlab is single-stack IPv4)", *spec.IPFamilyPolicy)
	}
	if spec.TrafficDistribution != nil {
		p.addf("spec.trafficDistribution", "is not supported (a lab has one zone)")
	}
}

// servicePorts validates the ports and returns their model form.
func servicePorts(in []corev1.ServicePort, p problems) []model.ServicePort {
	if len(in) == 0 {
		p.addf("spec.ports", "at least one port is required")
		return nil
	}
	var out []model.ServicePort
	seenPort := map[int32]int{}
	seenName := map[string]int{}
	for i, sp := range in {
		field := fmt.Sprintf("spec.ports[%d]", i)
		if msg := checkPort(int64(sp.Port)); msg != "" {
			p.addf(field+".port", "%s", msg)
		} else if j, dup := seenPort[sp.Port]; dup {
			p.addf(field+".port", "%d is a duplicate of spec.ports[%d].port", sp.Port, j)
		} else {
			seenPort[sp.Port] = i
		}
		if sp.Name != "" {
			checkName(p, field+".name", sp.Name, 63)
			if j, dup := seenName[sp.Name]; dup {
				p.addf(field+".name", "%q is a duplicate of spec.ports[%d].name", sp.Name, j)
			}
			seenName[sp.Name] = i
		}
		if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
			p.addf(field+".protocol", "%s is not supported (only TCP)", sp.Protocol)
		}
		if sp.NodePort != 0 {
			p.addf(field+".nodePort", "is not supported (meshlab has only ClusterIP services)")
		}
		target := sp.Port
		switch {
		case sp.TargetPort.Type == intstr.Int && sp.TargetPort.IntVal == 0 && checkPort(int64(sp.Port)) == "":
			// targetPort defaults to port, so the app listens on port itself.
			if msg := checkAppPort(int64(sp.Port)); msg != "" {
				p.addf(field+".port", "%s (and targetPort defaults to it)", msg)
			}
		case sp.TargetPort.Type == intstr.String:
			p.addf(field+".targetPort", "named port %q is not supported: give the container port number", sp.TargetPort.StrVal)
		case sp.TargetPort.IntVal != 0:
			target = sp.TargetPort.IntVal
			if msg := checkAppPort(int64(target)); msg != "" {
				p.addf(field+".targetPort", "%s", msg)
			}
		}
		if checkPort(int64(sp.Port)) != "" || checkAppPort(int64(target)) != "" {
			continue
		}
		out = append(out, model.ServicePort{
			Name:        sp.Name,
			Port:        uint16(sp.Port),
			TargetPort:  uint16(target),
			Protocol:    protocolFor(sp.Name, sp.AppProtocol),
			AppProtocol: appProtocolOf(sp),
		})
	}
	return out
}

// appProtocolOf returns the port's appProtocol, "" when it has none.
func appProtocolOf(sp corev1.ServicePort) string {
	if sp.AppProtocol == nil {
		return ""
	}
	return *sp.AppProtocol
}

// checkExternalName checks an ExternalName Service as the API server does: a lowercase
// DNS name (RFC 1123), no cluster IP. Its ports are only what Istio reads of it: the
// port numbers and protocols the proxies route the alias on.
func checkExternalName(spec *corev1.ServiceSpec, p problems) {
	name := strings.TrimSuffix(spec.ExternalName, ".")
	switch {
	case name == "":
		p.addf("spec.externalName", "is required with type ExternalName")
	case len(name) > 253 || strings.ToLower(name) != name || strings.ContainsAny(name, " /:*_") || strings.HasPrefix(name, ".") || strings.Contains(name, ".."):
		p.addf("spec.externalName", "%q is not a lowercase RFC 1123 DNS name", spec.ExternalName)
	}
	if spec.ClusterIP != "" && spec.ClusterIP != corev1.ClusterIPNone {
		p.addf("spec.clusterIP", "must be empty with type ExternalName (an ExternalName Service has no address)")
	}
}

// externalNamesOf returns the model form of the objects' ExternalName Services, sorted.
func externalNamesOf(objs []*Object) []*model.ExternalName {
	var out []*model.ExternalName
	for _, o := range objs {
		if o.Service == nil || o.Service.Spec.Type != corev1.ServiceTypeExternalName {
			continue
		}
		e := &model.ExternalName{
			Name: o.Origin.Name, Namespace: o.Origin.Namespace,
			Target: strings.TrimSuffix(strings.ToLower(o.Service.Spec.ExternalName), "."),
			Origin: o.Origin,
		}
		for _, sp := range o.Service.Spec.Ports {
			e.Ports = append(e.Ports, model.ServicePort{Name: sp.Name, Port: uint16(sp.Port), TargetPort: uint16(sp.Port), Protocol: protocolFor(sp.Name, sp.AppProtocol)})
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *model.ExternalName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

// externalNameIstio returns the ServiceEntry istiod's Kubernetes registry makes of each
// ExternalName Service (kube/conversion.go): its FQDN as the host, MESH_INTERNAL,
// resolution DNS with the target as the one endpoint on each port, no address. The
// proxies reach the alias as any DNS service: an HTTP port's virtual host under the
// alias's names, a cluster of the target's addresses.
func externalNameIstio(m *model.Model) []*Object {
	var out []*Object
	for _, e := range m.ExternalNames {
		se := &networking.ServiceEntry{
			Hosts:      []string{e.Hostname()},
			Location:   networking.ServiceEntry_MESH_INTERNAL,
			Resolution: networking.ServiceEntry_DNS,
			Endpoints:  []*networking.WorkloadEntry{{Address: e.Target}},
		}
		for _, p := range e.Ports {
			name := p.Name
			if name == "" {
				name = fmt.Sprintf("port-%d", p.Port)
			}
			proto := p.Protocol.String()
			if p.Protocol.IsAuto() {
				// istiod writes "UnsupportedProtocol"; a ServiceEntry says the same with
				// no protocol (meshlab's sidecars route such an entry's port as HTTP).
				proto = ""
			}
			se.Ports = append(se.Ports, &networking.ServicePort{Number: uint32(p.Port), Name: name, Protocol: proto})
		}
		out = append(out, &Object{
			Origin:       e.Origin,
			ServiceEntry: se,
		})
	}
	return out
}

package lab

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	networking "istio.io/api/networking/v1alpha3"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// DescribeService implements web.ServiceDescriber: the view is computed from the live
// model the proxies' config is generated from (describeService), the selected pods'
// readiness from their agents, and the endpoints as the first ready sidecar outside the
// service sees them (its admin /clusters).
func (l *Lab) DescribeService(ctx context.Context, namespace, name string) (api.ServiceView, error) {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	v, err := describeService(m, namespace, name)
	if err != nil {
		return v, err
	}
	pods, err := l.Pods(ctx)
	if err != nil {
		return v, err
	}
	selected := map[string]bool{}
	for i := range v.Pods {
		selected[model.PodKey(v.Namespace, v.Pods[i].Name)] = true
		for _, p := range pods {
			if p.Name == v.Pods[i].Name && p.Namespace == v.Namespace {
				v.Pods[i].Ready = p.Ready
			}
		}
	}
	for _, p := range pods {
		if !p.Sidecar || !p.Ready || selected[p.Key] {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c := l.agentClient(p.Key)
		text, err := c.AdminBytes(actx, "clusters")
		c.Close()
		cancel()
		if err != nil {
			continue
		}
		v.Endpoints, v.EndpointsFrom = clusterHealth(string(text), v.Hostname), p.Key
		break
	}
	return v, nil
}

// describeService computes the view of Service name of namespace ("" for any) from the
// model: its pods are those its selector matches, each port's mTLS mode is what
// xds.EffectiveMTLSMode (the function the proxies' inbound chains are built from) gives
// for every selected pod, and the policies listed are those xds.PolicySelects applies
// to them. An unknown name is an api.ErrUnknownService listing the services there are.
func describeService(m *model.Model, namespace, name string) (api.ServiceView, error) {
	var svc *model.Service
	var names, namespaces []string
	for _, s := range m.Services {
		if namespace == "" || s.Namespace == namespace {
			names = append(names, s.Name)
		}
		if s.Name == name && (namespace == "" || s.Namespace == namespace) {
			svc = s
			namespaces = append(namespaces, s.Namespace)
		}
	}
	switch {
	case svc == nil:
		return api.ServiceView{}, fmt.Errorf("%w %q (services: %s)", api.ErrUnknownService, name, strings.Join(slices.Compact(slices.Sorted(slices.Values(names))), ", "))
	case len(namespaces) > 1:
		return api.ServiceView{}, fmt.Errorf("%w: service %q is in namespaces %s: name one", api.ErrInvalid, name, strings.Join(namespaces, ", "))
	}
	ns, host := svc.Namespace, svc.Hostname()
	v := api.ServiceView{Name: svc.Name, Namespace: ns, Hostname: host, Selector: svc.Selector, Pods: []api.ServicePodView{}}
	if svc.VIP.IsValid() {
		v.VIP = svc.VIP.String()
	}
	var pods []*model.Pod
	for _, p := range m.Pods {
		if p.Namespace == ns && svc.Selects(p.Labels) {
			pods = append(pods, p)
			v.Pods = append(v.Pods, api.ServicePodView{Name: p.Name, IP: p.IP, Ready: !p.Sidecar.Inject})
		}
	}
	for _, sp := range svc.Ports {
		v.Ports = append(v.Ports, api.ServicePortView{Name: sp.Name, Port: sp.Port, TargetPort: sp.TargetPort,
			Protocol: sp.Protocol.String(), MTLS: mtlsMode(m, pods, ns, sp.TargetPort)})
	}
	hostIs := func(h, from string) bool {
		return slices.Contains(model.HostCandidates(strings.TrimSuffix(h, "."), from), host)
	}
	for _, vs := range m.Istio.VirtualServices {
		if slices.ContainsFunc(vs.Spec.GetHosts(), func(h string) bool { return hostIs(h, vs.Namespace) }) ||
			slices.ContainsFunc(routeHosts(vs.Spec), func(h string) bool { return hostIs(h, vs.Namespace) }) {
			v.VirtualServices = append(v.VirtualServices, vs.Namespace+"/"+vs.Name)
		}
	}
	for _, dr := range m.Istio.DestinationRules {
		if !hostIs(dr.Spec.GetHost(), dr.Namespace) {
			continue
		}
		if v.DestinationRules == nil {
			v.DestinationRules = map[string][]string{}
		}
		subsets := []string{}
		for _, s := range dr.Spec.GetSubsets() {
			subsets = append(subsets, s.GetName())
		}
		v.DestinationRules[dr.Namespace+"/"+dr.Name] = subsets
	}
	// A policy applies when it selects one of the pods; with no pod, when it would select
	// a pod of the namespace without labels (a namespace or mesh policy).
	targets := pods
	if len(targets) == 0 {
		targets = []*model.Pod{{Namespace: ns}}
	}
	root := m.Mesh.Root()
	applies := func(from string, sel *typev1beta1.WorkloadSelector) bool {
		return slices.ContainsFunc(targets, func(p *model.Pod) bool { return xds.PolicySelects(from, sel, root, p) })
	}
	for _, pa := range m.Istio.PeerAuthentications {
		if applies(pa.Namespace, pa.Spec.GetSelector()) {
			v.PeerAuthentications = append(v.PeerAuthentications, pa.Namespace+"/"+pa.Name)
		}
	}
	for _, ap := range m.Istio.AuthorizationPolicies {
		if applies(ap.Namespace, ap.Spec.GetSelector()) {
			v.AuthorizationPolicies = append(v.AuthorizationPolicies, ap.Namespace+"/"+ap.Name+" ("+ap.Spec.GetAction().String()+")")
		}
	}
	return v, nil
}

// mtlsMode returns the mode in effect on port of pods, computed by the function the
// proxies' inbound chains are built from (xds.EffectiveMTLSMode), so describe shows the
// mode that is enforced. Pods that differ (a workload policy selects some) are listed by
// mode; with no pod, the namespace's mode.
func mtlsMode(m *model.Model, pods []*model.Pod, ns string, port uint16) string {
	if len(pods) == 0 {
		pods = []*model.Pod{{Namespace: ns}}
	}
	var modes []string
	byMode := map[string][]string{}
	for _, p := range pods {
		mode := xds.EffectiveMTLSMode(m, p, port).String()
		if byMode[mode] == nil {
			modes = append(modes, mode)
		}
		byMode[mode] = append(byMode[mode], p.Name)
	}
	if len(modes) == 1 {
		return modes[0]
	}
	parts := make([]string, len(modes))
	for i, mode := range modes {
		parts[i] = mode + " (" + strings.Join(byMode[mode], ", ") + ")"
	}
	return strings.Join(parts, "; ")
}

// routeHosts returns the destination hosts of a VirtualService's HTTP and TCP routes.
func routeHosts(vs *networking.VirtualService) []string {
	var hosts []string
	for _, h := range vs.GetHttp() {
		for _, r := range h.GetRoute() {
			hosts = append(hosts, r.GetDestination().GetHost())
		}
	}
	for _, t := range vs.GetTcp() {
		for _, r := range t.GetRoute() {
			hosts = append(hosts, r.GetDestination().GetHost())
		}
	}
	return hosts
}

// clusterHealth reads Envoy's admin /clusters text for the outbound clusters of host:
// lines "outbound|8080||host::10.244.0.3:8080::health_flags::healthy".
func clusterHealth(text, host string) []api.EndpointView {
	var out []api.EndpointView
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "::")
		if len(parts) != 4 || parts[2] != "health_flags" || !strings.HasPrefix(parts[0], "outbound|") || !strings.HasSuffix(parts[0], "|"+host) {
			continue
		}
		out = append(out, api.EndpointView{Cluster: parts[0], Address: parts[1], Health: parts[3]})
	}
	return out
}

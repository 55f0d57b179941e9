package analyze

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// checkRouting reports what istioctl analyze reports about VirtualServices and
// DestinationRules: references to hosts and subsets that do not exist (IST0101), several
// VirtualServices for one host (IST0109), DestinationRules for hosts no service has
// (IST0174), subsets that select no pod (IST0173) and the deprecated
// fault.delay.percent (IST0002, which Istio still honours). Weights need no check:
// Istio's are relative, and validation (the loader) refuses only negative weights and an
// all-zero total.
func checkRouting(r *registry, objs []*object) []Finding {
	var fs []Finding
	for _, o := range objs {
		if o.dr != nil {
			fs = append(fs, checkDestinationRule(r, o)...)
		}
		vs := o.vs
		if vs == nil {
			continue
		}
		for i, h := range vs.GetHosts() {
			if !model.AppliesToMesh(vs) {
				// A gateway's VirtualService names the hosts clients ask the gateway
				// for ("*" in the ingress tasks), not the mesh's services.
				break
			}
			if _, ok := r.lookup(h, o.ref.Namespace); !ok {
				// istioctl has no analyzer for this: Istio accepts the VirtualService and
				// applies it to plain HTTP on port 80 for that name; meshlab accepts it too
				// (its Service may have been deleted first) and routes nothing by it.
				fs = append(fs, o.finding(Warning, CodeVirtualServiceHostNotFound, fmt.Sprintf("spec.hosts[%d]", i),
					fmt.Sprintf("Host %q names no Service or ServiceEntry of the lab: meshlab's sidecars route nothing by it (Istio applies it only to port 80 requests for that name).", h)))
			}
		}
		for i, hr := range vs.GetHttp() {
			//nolint:staticcheck // percent is deprecated; this reports its use, as Istio's FieldAnalyzer.
			if hr.GetFault().GetDelay().GetPercent() > 0 {
				fs = append(fs, o.finding(Warning, CodeDeprecated, fmt.Sprintf("spec.http[%d].fault.delay.percent", i),
					"Deprecated: HTTPRoute.fault.delay.percent is deprecated; use HTTPRoute.fault.delay.percentage"))
			}
			for j, rd := range hr.GetRoute() {
				fs = append(fs, checkDestination(r, o, rd.GetDestination(), fmt.Sprintf("spec.http[%d].route[%d].destination", i, j), "host")...)
			}
			if hr.GetMirror() != nil {
				fs = append(fs, checkDestination(r, o, hr.GetMirror(), fmt.Sprintf("spec.http[%d].mirror", i), "mirror")...)
			}
		}
		for i, tr := range vs.GetTcp() {
			for j, rd := range tr.GetRoute() {
				fs = append(fs, checkDestination(r, o, rd.GetDestination(), fmt.Sprintf("spec.tcp[%d].route[%d].destination", i, j), "host")...)
			}
		}
	}
	return append(fs, checkConflictingHosts(r, objs)...)
}

// checkDestination reports a destination whose host or subset does not exist, in
// istioctl's words; what is "host" for a route and "mirror" for a mirror.
func checkDestination(r *registry, o *object, d *networking.Destination, field, what string) []Finding {
	if d.GetHost() == "" {
		return nil
	}
	fqdn, ok := r.lookup(d.GetHost(), o.ref.Namespace)
	if !ok {
		name := "host"
		if what == "mirror" {
			name = "mirror host"
		}
		return []Finding{o.finding(Error, CodeReferencedResourceNotFound, field+".host",
			fmt.Sprintf("Referenced %s not found: %q", name, d.GetHost()))}
	}
	if s := d.GetSubset(); s != "" && !r.subsets[fqdn][s] {
		return []Finding{o.finding(Error, CodeReferencedResourceNotFound, field+".subset",
			fmt.Sprintf("Referenced %s+subset in destinationrule not found: %q", what, d.GetHost()+"+"+s))}
	}
	return nil
}

// checkDestinationRule reports, as Istio's SubsetSelectPodAnalyzer, a rule whose host
// is no service (IST0174: Istio accepts it and it configures nothing) and each subset
// whose labels, with the service's selector, match no pod of the lab (IST0173: its
// cluster has no endpoints, so requests routed to it fail with 503 UH). Like Istio's,
// the pods may be in any namespace.
func checkDestinationRule(r *registry, o *object) []Finding {
	fqdn, ok := r.lookup(o.dr.GetHost(), o.ref.Namespace)
	if !ok {
		return []Finding{o.finding(Warning, CodeUnknownDestinationRuleHost, "spec.host",
			fmt.Sprintf("The host %s defined in the DestinationRule does not match any services in the mesh.", o.dr.GetHost()))}
	}
	var base map[string]string
	if s := r.services[fqdn]; s != nil {
		base = serviceSelector(s.svc)
	}
	var fs []Finding
	for i, s := range o.dr.GetSubsets() {
		want := maps.Clone(base)
		if want == nil {
			want = map[string]string{}
		}
		maps.Copy(want, s.GetLabels())
		if slices.ContainsFunc(r.workloads, func(w *object) bool { return matchesAll(want, w.labels) }) {
			continue
		}
		fs = append(fs, o.finding(Error, CodeDestinationRuleSubsetNotSelectPods, fmt.Sprintf("spec.subsets[%d]", i),
			fmt.Sprintf("The Subset %s defined in the DestinationRule does not select any pods. Which may lead to 503 UH (NoHealthyUpstream).", s.GetName())))
	}
	return fs
}

// matchesAll reports whether labels has every key and value of selector (an empty
// selector matches every pod, as a Kubernetes label selector).
func matchesAll(selector, labels map[string]string) bool {
	for k, v := range selector {
		if l, ok := labels[k]; !ok || l != v {
			return false
		}
	}
	return true
}

// checkConflictingHosts reports, as Istio's ConflictingMeshGatewayHostsAnalyzer, each
// VirtualService that names a host another one names too (IST0109). Only one of them
// routes the host (see controlplane/xds virtualServiceFor); istiod does not merge them.
// Hosts compare as meshlab's generator resolves them; meshlab's VirtualServices are all
// bound to the mesh gateway and exported to every namespace ("*/" in Istio's message).
func checkConflictingHosts(r *registry, objs []*object) []Finding {
	byHost := map[string][]*object{}
	var hosts []string
	for _, o := range objs {
		if o.vs == nil {
			continue
		}
		seen := map[string]bool{}
		for _, h := range o.vs.GetHosts() {
			fqdn, ok := r.lookup(h, o.ref.Namespace)
			if !ok {
				fqdn = model.HostCandidates(h, o.ref.Namespace)[0]
			}
			if seen[fqdn] {
				continue
			}
			seen[fqdn] = true
			if byHost[fqdn] == nil {
				hosts = append(hosts, fqdn)
			}
			byHost[fqdn] = append(byHost[fqdn], o)
		}
	}
	slices.Sort(hosts)
	var fs []Finding
	reported := map[*object]bool{}
	for _, h := range hosts {
		vss := byHost[h]
		if len(vss) < 2 {
			continue
		}
		names := make([]string, len(vss))
		for i, o := range vss {
			names[i] = o.ref.Namespace + "/" + o.ref.Name
		}
		slices.Sort(names)
		for _, o := range vss {
			if reported[o] {
				continue
			}
			reported[o] = true
			fs = append(fs, o.finding(Error, CodeConflictingMeshGatewayVirtualServiceHosts, "metadata.name",
				fmt.Sprintf("The VirtualServices %s associated with mesh gateway define the same host */%s which can lead to undefined behavior. This can be fixed by merging the conflicting VirtualServices into a single resource.",
					strings.Join(names, ","), h)))
		}
	}
	return fs
}

// finding returns a finding about o.
func (o *object) finding(l Level, code, field, msg string) Finding {
	return Finding{Level: l, Code: code, Object: o.ref, File: o.file, Field: field, Message: msg}
}

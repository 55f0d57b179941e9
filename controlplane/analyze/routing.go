package analyze

import (
	"fmt"

	networking "istio.io/api/networking/v1alpha3"
)

// checkRouting reports VirtualService and DestinationRule references to hosts and subsets
// that do not exist, and route weights that do not sum to 100.
func checkRouting(r *registry, objs []*object) []Finding {
	var fs []Finding
	for _, o := range objs {
		if o.dr != nil {
			if _, ok := r.lookup(o.dr.GetHost(), o.ref.Namespace); !ok {
				fs = append(fs, o.finding(Error, CodeReferencedResourceNotFound, "spec.host",
					fmt.Sprintf("Referenced host not found: %q", o.dr.GetHost())))
			}
		}
		vs := o.vs
		if vs == nil {
			continue
		}
		for i, h := range vs.GetHosts() {
			if _, ok := r.lookup(h, o.ref.Namespace); !ok {
				fs = append(fs, o.finding(Error, CodeReferencedResourceNotFound, fmt.Sprintf("spec.hosts[%d]", i),
					fmt.Sprintf("Referenced host not found: %q", h)))
			}
		}
		for i, hr := range vs.GetHttp() {
			var weights []int32
			for j, rd := range hr.GetRoute() {
				fs = append(fs, checkDestination(r, o, rd.GetDestination(), fmt.Sprintf("spec.http[%d].route[%d].destination", i, j))...)
				weights = append(weights, rd.GetWeight())
			}
			if hr.GetMirror() != nil {
				fs = append(fs, checkDestination(r, o, hr.GetMirror(), fmt.Sprintf("spec.http[%d].mirror", i))...)
			}
			fs = append(fs, checkWeights(o, weights, fmt.Sprintf("spec.http[%d].route", i))...)
		}
		for i, tr := range vs.GetTcp() {
			var weights []int32
			for j, rd := range tr.GetRoute() {
				fs = append(fs, checkDestination(r, o, rd.GetDestination(), fmt.Sprintf("spec.tcp[%d].route[%d].destination", i, j))...)
				weights = append(weights, rd.GetWeight())
			}
			fs = append(fs, checkWeights(o, weights, fmt.Sprintf("spec.tcp[%d].route", i))...)
		}
	}
	return fs
}

func checkDestination(r *registry, o *object, d *networking.Destination, field string) []Finding {
	if d.GetHost() == "" {
		return nil
	}
	fqdn, ok := r.lookup(d.GetHost(), o.ref.Namespace)
	if !ok {
		return []Finding{o.finding(Error, CodeReferencedResourceNotFound, field+".host",
			fmt.Sprintf("Referenced host not found: %q", d.GetHost()))}
	}
	if s := d.GetSubset(); s != "" && !r.subsets[fqdn][s] {
		return []Finding{o.finding(Error, CodeReferencedResourceNotFound, field+".subset",
			fmt.Sprintf("Referenced host+subset in destinationrule not found: %q", d.GetHost()+"+"+s))}
	}
	return nil
}

// checkWeights reports several destinations whose weights do not sum to 100, which
// Istio's validation refuses.
func checkWeights(o *object, w []int32, field string) []Finding {
	if len(w) < 2 {
		return nil
	}
	var sum int64
	for _, v := range w {
		sum += int64(v)
	}
	if sum == 100 {
		return nil
	}
	return []Finding{o.finding(Error, CodeWeightsNotHundred, field,
		fmt.Sprintf("Route weights sum to %d, want 100 (Istio's validation refuses this VirtualService).", sum))}
}

// finding returns a finding about o.
func (o *object) finding(l Level, code, field, msg string) Finding {
	return Finding{Level: l, Code: code, Object: o.ref, File: o.file, Field: field, Message: msg}
}

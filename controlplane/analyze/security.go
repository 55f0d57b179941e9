package analyze

import (
	"fmt"

	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// checkSecurity reports conflicting PeerAuthentications (several mesh-wide, or several
// namespace-wide in one namespace), policies whose selector matches no Workload, and
// DestinationRules that disable TLS to a port a PeerAuthentication makes STRICT.
func checkSecurity(r *registry, objs []*object) []Finding {
	var fs []Finding
	root := model.DefaultRootNamespace
	wide := map[string]*object{} // namespace-wide (or mesh-wide, in root) PeerAuthentication by namespace
	for _, o := range objs {
		if o.pa == nil {
			continue
		}
		if sel := o.pa.GetSelector().GetMatchLabels(); len(sel) > 0 {
			if len(r.podsOf(o.ref.Namespace, sel)) == 0 {
				fs = append(fs, o.finding(Warning, CodeNoMatchingWorkloadsFound, "spec.selector",
					fmt.Sprintf("No matching workloads for this resource with the following labels: %s", formatLabels(sel))))
			}
			continue
		}
		prev := wide[o.ref.Namespace]
		switch {
		case prev == nil:
			wide[o.ref.Namespace] = o
		case o.ref.Namespace == root:
			fs = append(fs, o.finding(Error, CodeMultipleMeshWidePolicies, "spec.selector",
				fmt.Sprintf("A second mesh-wide PeerAuthentication (namespace %s, no selector): %s is already one; which applies is undefined.", root, prev.ref)))
		default:
			fs = append(fs, o.finding(Error, CodeConflictingPeerAuthentication, "spec.selector",
				fmt.Sprintf("A second namespace-wide PeerAuthentication in namespace %s: %s is already one; which applies is undefined.", o.ref.Namespace, prev.ref)))
		}
	}
	for _, o := range objs {
		if o.ap == nil {
			continue
		}
		if sel := o.ap.GetSelector().GetMatchLabels(); len(sel) > 0 && len(r.podsOf(o.ref.Namespace, sel)) == 0 {
			fs = append(fs, o.finding(Warning, CodeNoMatchingWorkloadsFound, "spec.selector",
				fmt.Sprintf("No matching workloads for this resource with the following labels: %s", formatLabels(sel))))
		}
		fs = append(fs, checkHTTPOnlyDeny(o)...)
	}
	for _, o := range objs {
		if o.dr != nil {
			fs = append(fs, checkMTLSConflict(r, objs, wide, o)...)
		}
	}
	return fs
}

// checkMTLSConflict reports the ports of a DestinationRule's Service where the rule
// disables TLS while the PeerAuthentication in effect on a selected pod is STRICT.
func checkMTLSConflict(r *registry, objs []*object, wide map[string]*object, dr *object) []Finding {
	fqdn, ok := r.lookup(dr.dr.GetHost(), dr.ref.Namespace)
	if !ok || r.services[fqdn] == nil {
		return nil
	}
	svc := r.services[fqdn]
	pods := r.podsOf(svc.ref.Namespace, serviceSelector(svc.svc))
	var fs []Finding
	tp := dr.dr.GetTrafficPolicy()
	for _, sp := range svc.svc.Spec.Ports {
		field := "spec.trafficPolicy.tls.mode"
		disabled := tp.GetTls().GetMode() == networking.ClientTLSSettings_DISABLE
		for i, pl := range tp.GetPortLevelSettings() {
			if pl.GetPort().GetNumber() == uint32(sp.Port) && pl.GetTls() != nil {
				disabled = pl.GetTls().GetMode() == networking.ClientTLSSettings_DISABLE
				field = fmt.Sprintf("spec.trafficPolicy.portLevelSettings[%d].tls.mode", i)
			}
		}
		if !disabled {
			continue
		}
		target := uint32(sp.TargetPort.IntValue())
		if target == 0 {
			target = uint32(sp.Port)
		}
		for _, w := range pods {
			mode, pa := effectiveMode(objs, wide, w, target)
			if mode != security.PeerAuthentication_MutualTLS_STRICT {
				continue
			}
			fs = append(fs, dr.finding(Error, CodeMTLSPolicyConflict, field,
				fmt.Sprintf("A DestinationRule and Policy are in conflict with regards to mTLS for host %s:%d. The DestinationRule %q specifies that mTLS must be false but the Policy object %q specifies STRICT.",
					fqdn, sp.Port, dr.ref.Namespace+"/"+dr.ref.Name, pa.ref.Namespace+"/"+pa.ref.Name)))
			break
		}
	}
	return fs
}

// effectiveMode returns the mTLS mode in effect for port of Workload w and the
// PeerAuthentication that set it: the workload's own policy (its port-level setting
// first), then its namespace's, then the mesh's; UNSET inherits. Without any, PERMISSIVE.
func effectiveMode(objs []*object, wide map[string]*object, w *object, port uint32) (security.PeerAuthentication_MutualTLS_Mode, *object) {
	var chain []*object
	for _, o := range objs {
		if o.pa != nil && o.ref.Namespace == w.ref.Namespace && selects(o.pa.GetSelector().GetMatchLabels(), w.labels) {
			chain = append(chain, o)
			break
		}
	}
	if ns := wide[w.ref.Namespace]; ns != nil {
		chain = append(chain, ns)
	}
	if mesh := wide[model.DefaultRootNamespace]; mesh != nil && w.ref.Namespace != model.DefaultRootNamespace {
		chain = append(chain, mesh)
	}
	for _, pa := range chain {
		if pl := pa.pa.GetPortLevelMtls()[port]; pl != nil && pl.GetMode() != security.PeerAuthentication_MutualTLS_UNSET {
			return pl.GetMode(), pa
		}
		if m := pa.pa.GetMtls().GetMode(); m != security.PeerAuthentication_MutualTLS_UNSET {
			return m, pa
		}
	}
	return security.PeerAuthentication_MutualTLS_PERMISSIVE, nil
}

// checkHTTPOnlyDeny reports, with Istio's validation warning (IST0133), each rule of a
// DENY policy that uses only HTTP attributes: on a TCP port such a rule cannot be
// evaluated, so Istio (and meshlab's generator) make it deny every connection. The test
// is Istio's: the rule's sources set no principal, namespace, service account or IP
// block while its operations set no port.
func checkHTTPOnlyDeny(o *object) []Finding {
	if o.ap.GetAction() != security.AuthorizationPolicy_DENY {
		return nil
	}
	var fs []Finding
	for i, rule := range o.ap.GetRules() {
		fromExists, toExists, tcpFrom, tcpTo := false, false, false, false
		for _, f := range rule.GetFrom() {
			src := f.GetSource()
			if src == nil {
				continue
			}
			fromExists = true
			if src.NotPrincipals != nil || src.Principals != nil || src.IpBlocks != nil || src.NotIpBlocks != nil ||
				src.Namespaces != nil || src.NotNamespaces != nil || src.RemoteIpBlocks != nil || src.NotRemoteIpBlocks != nil ||
				src.ServiceAccounts != nil || src.NotServiceAccounts != nil {
				tcpFrom = true
			}
		}
		for _, t := range rule.GetTo() {
			op := t.GetOperation()
			if op == nil {
				continue
			}
			toExists = true
			if op.Ports != nil || op.NotPorts != nil {
				tcpTo = true
			}
		}
		if (fromExists && !toExists && !tcpFrom) || (toExists && !tcpTo) {
			fs = append(fs, o.finding(Warning, CodeSchemaWarning, fmt.Sprintf("spec.rules[%d]", i),
				"Schema validation warning: configured AuthorizationPolicy will deny all traffic to TCP ports under its scope due to the use of only HTTP attributes in a DENY rule; it is recommended to explicitly specify the port"))
		}
	}
	return fs
}

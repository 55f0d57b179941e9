package lab

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/netns/kubeproxy"
)

// kubeProxyRulesFile is where the node's current kube-proxy rules are kept, for reading.
const kubeProxyRulesFile = "kube-proxy.rules"

// kubeProxyConfig returns every port of every service of m with the pod addresses behind
// it, as kube-proxy reads Services and EndpointSlices.
func kubeProxyConfig(m *model.Model) kubeproxy.Config {
	var c kubeproxy.Config
	for _, s := range m.Services {
		for _, p := range s.Ports {
			var eps []netip.AddrPort
			for _, e := range m.Endpoints(s, p) {
				eps = append(eps, e.Addr)
			}
			c.Services = append(c.Services, kubeproxy.ServicePort{
				Namespace: s.Namespace, Name: s.Name, PortName: p.Name,
				VIP: s.VIP, Port: p.Port, Protocol: kubeproxy.TCP, Endpoints: eps,
			})
		}
	}
	return c
}

// setupKubeProxy makes the node namespace forward VIP traffic and installs the rules, so
// that traffic no sidecar captures (a pod without a sidecar, a sidecar's own connections)
// still reaches a service. It runs at up, after the node network and before any pod.
func (l *Lab) setupKubeProxy() error {
	if err := l.syscalls().ns.PrepareNode(NodeNamespace(l.opts.Name), l.opts.ServiceCIDR, bridgeName); err != nil {
		return err
	}
	return l.syncKubeProxy()
}

// syncKubeProxy renders the current model's rules and replaces the node's with them, as
// kube-proxy's full sync does, unless they are the rules it installed last: most
// changes (a VirtualService, a DestinationRule) leave Services and endpoints as they
// were, and an iptables-restore costs tens of milliseconds of every apply. Nor does it
// render them when the Services and endpoints they come from are those of the rules
// installed last (rendering 100 pods' rules was most of a VirtualService apply's own
// CPU). The caller holds l.mu or is creating the lab.
func (l *Lab) syncKubeProxy() error {
	if l.jr == nil {
		return nil // the lab never created its network (a Lab made by unit tests)
	}
	c := kubeProxyConfig(l.model)
	if l.kubeProxyRules != "" && reflect.DeepEqual(c, l.kubeProxyFrom) {
		return nil
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("render kube-proxy rules: %w", err)
	}
	rules := c.Render()
	if rules == l.kubeProxyRules {
		return nil
	}
	l.kubeProxyRules = "" // unknown until installed
	if err := os.WriteFile(filepath.Join(l.paths.Dir, kubeProxyRulesFile), []byte(rules), 0o644); err != nil {
		return fmt.Errorf("write kube-proxy rules: %w", err)
	}
	ns := NodeNamespace(l.opts.Name)
	if err := l.syscalls().ns.ApplyRules(ns, rules); err != nil {
		return fmt.Errorf("install kube-proxy rules in %s: %w", ns, err)
	}
	l.kubeProxyRules, l.kubeProxyFrom = rules, c
	return nil
}

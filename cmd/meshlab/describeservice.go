package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	corev1 "k8s.io/api/core/v1"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
	"github.com/meshlab/meshlab/lab"
)

// ServiceView is `meshlab describe service`: a Service with what serves it and what
// applies to it.
type ServiceView struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Hostname  string            `json:"hostname"`
	VIP       string            `json:"vip,omitempty"`
	Selector  map[string]string `json:"selector,omitempty"`
	Ports     []ServicePortView `json:"ports"`
	Pods      []ServicePodView  `json:"pods"`
	// Endpoints are the service's endpoints as a client proxy sees them (its /clusters),
	// with that proxy's health flags; EndpointsFrom names the proxy.
	Endpoints       []EndpointView `json:"endpoints,omitempty"`
	EndpointsFrom   string         `json:"endpointsFrom,omitempty"`
	VirtualServices []string       `json:"virtualServices,omitempty"`
	// DestinationRules map a rule's namespace/name to the subsets it defines.
	DestinationRules      map[string][]string `json:"destinationRules,omitempty"`
	PeerAuthentications   []string            `json:"peerAuthentications,omitempty"`
	AuthorizationPolicies []string            `json:"authorizationPolicies,omitempty"`
}

// ServicePortView is one port of the service with its protocol and mTLS mode.
type ServicePortView struct {
	Name        string `json:"name,omitempty"`
	Port        int32  `json:"port"`
	TargetPort  string `json:"targetPort"`
	AppProtocol string `json:"appProtocol,omitempty"`
	// MTLS is the PeerAuthentication mode in effect on the port's target port (for the
	// first selected pod): STRICT, PERMISSIVE or DISABLE.
	MTLS string `json:"mtls"`
}

// ServicePodView is one pod the service selects.
type ServicePodView struct {
	Name  string     `json:"name"`
	IP    netip.Addr `json:"ip"`
	Ready bool       `json:"ready"`
}

// EndpointView is one endpoint of an outbound cluster of the service.
type EndpointView struct {
	Cluster string `json:"cluster"`
	Address string `json:"address"`
	Health  string `json:"health"`
}

func newDescribeServiceCmd(g *globalFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "service NAME",
		Aliases:           []string{"svc"},
		Short:             "Show a service: ports, VIP, pods and endpoint health, and the Istio objects that apply to it",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeServices(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			v, err := describeService(cmd.Context(), g, args[0])
			if err != nil {
				return err
			}
			return printOutput(cmd.OutOrStdout(), output, v, func(w io.Writer) error { return printServiceView(w, v) })
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// describeService gathers the view from the lab API and one client proxy's admin API.
func describeService(ctx context.Context, g *globalFlags, name string) (ServiceView, error) {
	c, err := g.apiClient()
	if err != nil {
		return ServiceView{}, err
	}
	defer c.Close()
	objs, err := c.Objects(ctx, "all", "", "")
	if err != nil {
		return ServiceView{}, err
	}
	pods, err := c.Pods(ctx)
	if err != nil {
		return ServiceView{}, err
	}
	v, err := buildServiceView(objs, pods, name)
	if err != nil {
		return ServiceView{}, err
	}
	labName, _ := g.labName()
	paths := lab.PathsFor(g.runRoot, labName)
	// The VIP, from the name table the lab serves its agents.
	if len(pods) > 0 {
		if nt, err := c.NameTable(ctx, pods[0].Name, 0); err == nil {
			if a := nt.Names[v.Hostname]; len(a) > 0 {
				v.VIP = a[0].String()
			}
		}
	}
	// Endpoint health as a ready client proxy outside the service sees it.
	selected := map[string]bool{}
	for _, p := range v.Pods {
		selected[p.Name] = true
	}
	for _, p := range pods {
		if !p.Sidecar || !p.Ready || selected[p.Name] {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		text, err := fetchAdmin(actx, paths.AgentSocket(p.Name), "clusters")
		cancel()
		if err != nil {
			continue
		}
		v.Endpoints, v.EndpointsFrom = parseClusterHealth(string(text), v.Hostname), p.Name
		break
	}
	return v, nil
}

// buildServiceView computes the view of Service name from the lab's objects and pods.
// An unknown name is an error listing the services there are.
func buildServiceView(objs []api.ConfigObject, pods []api.PodStatus, name string) (ServiceView, error) {
	var svc *corev1.Service
	var names []string
	for _, o := range objs {
		if o.Kind != "Service" {
			continue
		}
		names = append(names, o.Name)
		if o.Name == name {
			svc = &corev1.Service{}
			if err := json.Unmarshal(o.Object, svc); err != nil {
				return ServiceView{}, fmt.Errorf("decode Service %s: %w", name, err)
			}
			svc.Namespace = o.Namespace
		}
	}
	if svc == nil {
		return ServiceView{}, fmt.Errorf("no service %q (services: %s)", name, strings.Join(names, ", "))
	}
	ns := svc.Namespace
	v := ServiceView{Name: name, Namespace: ns, Hostname: name + "." + ns + ".svc.cluster.local", Selector: svc.Spec.Selector}
	hostMatches := func(h, from string) bool {
		h = strings.TrimSuffix(h, ".")
		return h == v.Hostname || h == name+"."+ns || h == name+"."+ns+".svc" || (h == name && from == ns)
	}
	// Pods: those made by Workloads whose labels the selector matches.
	var podLabels = map[string]map[string]string{}
	for _, o := range objs {
		if o.Kind != "Workload" || o.Namespace != ns {
			continue
		}
		var w struct {
			Spec struct {
				Replicas *int              `json:"replicas"`
				Labels   map[string]string `json:"labels"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(o.Object, &w); err != nil {
			continue
		}
		n := 1
		if w.Spec.Replicas != nil {
			n = *w.Spec.Replicas
		}
		if n == 1 {
			podLabels[o.Name] = w.Spec.Labels
		} else {
			for i := range n {
				podLabels[fmt.Sprintf("%s-%d", o.Name, i)] = w.Spec.Labels
			}
		}
	}
	var selectedLabels []map[string]string
	var selectedPods []*model.Pod
	for _, p := range pods {
		l, ok := podLabels[p.Name]
		if !ok || p.Namespace != ns || !labelsMatch(svc.Spec.Selector, l) {
			continue
		}
		v.Pods = append(v.Pods, ServicePodView{Name: p.Name, IP: p.IP, Ready: p.Ready})
		selectedLabels = append(selectedLabels, l)
		selectedPods = append(selectedPods, &model.Pod{Name: p.Name, Namespace: ns, Labels: l})
	}
	mesh := meshOf(objs)
	root := mesh.Mesh.Root()
	for _, o := range objs {
		spec, err := specOf(o.Object)
		if err != nil {
			continue
		}
		ref := o.Namespace + "/" + o.Name
		switch o.Kind {
		case "VirtualService":
			var vs networking.VirtualService
			if protojson.Unmarshal(spec, &vs) == nil && (slices.ContainsFunc(vs.GetHosts(), func(h string) bool { return hostMatches(h, o.Namespace) }) || routesTo(&vs, hostMatches, o.Namespace)) {
				v.VirtualServices = append(v.VirtualServices, ref)
			}
		case "DestinationRule":
			var dr networking.DestinationRule
			if protojson.Unmarshal(spec, &dr) == nil && hostMatches(dr.GetHost(), o.Namespace) {
				if v.DestinationRules == nil {
					v.DestinationRules = map[string][]string{}
				}
				subsets := []string{}
				for _, s := range dr.GetSubsets() {
					subsets = append(subsets, s.GetName())
				}
				v.DestinationRules[ref] = subsets
			}
		case "PeerAuthentication":
			var pa security.PeerAuthentication
			if protojson.Unmarshal(spec, &pa) == nil && appliesTo(pa.GetSelector().GetMatchLabels(), o.Namespace, ns, root, selectedLabels) {
				v.PeerAuthentications = append(v.PeerAuthentications, ref)
			}
		case "AuthorizationPolicy":
			var ap security.AuthorizationPolicy
			if protojson.Unmarshal(spec, &ap) == nil && appliesTo(ap.GetSelector().GetMatchLabels(), o.Namespace, ns, root, selectedLabels) {
				v.AuthorizationPolicies = append(v.AuthorizationPolicies, ref+" ("+ap.GetAction().String()+")")
			}
		}
	}
	for _, p := range svc.Spec.Ports {
		tp := p.TargetPort.String()
		target := p.TargetPort.IntValue()
		if target == 0 {
			target, tp = int(p.Port), fmt.Sprint(p.Port)
		}
		pv := ServicePortView{Name: p.Name, Port: p.Port, TargetPort: tp, MTLS: mtlsMode(mesh, selectedPods, ns, uint16(target))}
		if p.AppProtocol != nil {
			pv.AppProtocol = *p.AppProtocol
		}
		v.Ports = append(v.Ports, pv)
	}
	return v, nil
}

// meshOf returns a model holding what the proxy's mTLS mode is computed from: every
// PeerAuthentication of the lab, in the model's order (namespace, then name), and the
// MeshConfig's root namespace.
func meshOf(objs []api.ConfigObject) *model.Model {
	m := &model.Model{}
	for _, o := range objs {
		spec, err := specOf(o.Object)
		if err != nil {
			continue
		}
		switch o.Kind {
		case "PeerAuthentication":
			var pa security.PeerAuthentication
			if protojson.Unmarshal(spec, &pa) == nil {
				m.Istio.PeerAuthentications = append(m.Istio.PeerAuthentications,
					&model.IstioConfig[*security.PeerAuthentication]{Name: o.Name, Namespace: o.Namespace, Spec: &pa})
			}
		case "MeshConfig":
			var mc struct {
				RootNamespace string `json:"rootNamespace"`
			}
			if json.Unmarshal(spec, &mc) == nil {
				m.Mesh.RootNamespace = mc.RootNamespace
			}
		}
	}
	slices.SortStableFunc(m.Istio.PeerAuthentications, func(a, b *model.IstioConfig[*security.PeerAuthentication]) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return m
}

// mtlsMode returns the mode in effect on the target port of the service's pods, computed
// by the function the proxies' inbound chains are built from (xds.EffectiveMTLSMode), so
// describe shows the mode that is enforced. Pods that differ (a workload policy selects
// some) are listed by mode; with no pod, the namespace's mode.
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

// appliesTo reports whether a policy of namespace from with selector applies to a pod
// with one of labels in namespace ns: a selector must match, an empty one covers its
// namespace, or the whole mesh from the root namespace root.
func appliesTo(selector map[string]string, from, ns, root string, labels []map[string]string) bool {
	if len(selector) == 0 {
		return from == ns || from == root
	}
	return from == ns && slices.ContainsFunc(labels, func(l map[string]string) bool { return labelsMatch(selector, l) })
}

func labelsMatch(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func routesTo(vs *networking.VirtualService, match func(h, ns string) bool, ns string) bool {
	for _, h := range vs.GetHttp() {
		for _, r := range h.GetRoute() {
			if match(r.GetDestination().GetHost(), ns) {
				return true
			}
		}
	}
	for _, t := range vs.GetTcp() {
		for _, r := range t.GetRoute() {
			if match(r.GetDestination().GetHost(), ns) {
				return true
			}
		}
	}
	return false
}

// specOf returns the spec of an object as written (JSON).
func specOf(obj json.RawMessage) ([]byte, error) {
	var o struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(obj, &o); err != nil {
		return nil, err
	}
	if len(o.Spec) == 0 {
		return []byte("{}"), nil
	}
	return o.Spec, nil
}

// parseClusterHealth reads Envoy's admin /clusters text for the outbound clusters of
// host: lines "outbound|8080||host::10.244.0.3:8080::health_flags::healthy".
func parseClusterHealth(text, host string) []EndpointView {
	var out []EndpointView
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "::")
		if len(parts) != 4 || parts[2] != "health_flags" || !strings.HasPrefix(parts[0], "outbound|") || !strings.HasSuffix(parts[0], "|"+host) {
			continue
		}
		out = append(out, EndpointView{Cluster: parts[0], Address: parts[1], Health: parts[3]})
	}
	return out
}

func printServiceView(w io.Writer, v ServiceView) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Name:\t%s\n", v.Name)
	fmt.Fprintf(tw, "Namespace:\t%s\n", v.Namespace)
	fmt.Fprintf(tw, "Hostname:\t%s\n", v.Hostname)
	fmt.Fprintf(tw, "VIP:\t%s\n", orDash(v.VIP))
	fmt.Fprintf(tw, "Selector:\t%s\n", orDash(formatSelector(v.Selector)))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nPorts:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tPORT\tTARGET\tAPP PROTOCOL\tMTLS")
	for _, p := range v.Ports {
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\n", orDash(p.Name), p.Port, p.TargetPort, orDash(p.AppProtocol), p.MTLS)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nPods:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tIP\tREADY")
	for _, p := range v.Pods {
		fmt.Fprintf(tw, "  %s\t%s\t%t\n", p.Name, p.IP, p.Ready)
	}
	tw.Flush()
	if v.EndpointsFrom != "" {
		fmt.Fprintf(w, "\nEndpoints (as %s's proxy sees them):\n", v.EndpointsFrom)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  CLUSTER\tADDRESS\tHEALTH")
		for _, e := range v.Endpoints {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.Cluster, e.Address, e.Health)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var drs []string
	for _, k := range slices.Sorted(maps.Keys(v.DestinationRules)) {
		drs = append(drs, fmt.Sprintf("%s (subsets: %s)", k, orDash(strings.Join(v.DestinationRules[k], ","))))
	}
	fmt.Fprintf(tw, "VirtualServices:\t%s\n", orDash(strings.Join(v.VirtualServices, ", ")))
	fmt.Fprintf(tw, "DestinationRules:\t%s\n", orDash(strings.Join(drs, ", ")))
	fmt.Fprintf(tw, "PeerAuthentications:\t%s\n", orDash(strings.Join(v.PeerAuthentications, ", ")))
	fmt.Fprintf(tw, "AuthorizationPolicies:\t%s\n", orDash(strings.Join(v.AuthorizationPolicies, ", ")))
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func formatSelector(m map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kv = append(kv, k+"="+m[k])
	}
	return strings.Join(kv, ",")
}

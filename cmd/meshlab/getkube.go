package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/meshlab/meshlab/api"
)

// kubectl get's tables: the lab's Kubernetes view (GET /v1/kube, the objects an API
// server would hold, with the status their controllers write) printed in the columns
// kubectl prints for each kind (its server-side table columns for the built-in kinds,
// the CRDs' additionalPrinterColumns for Istio's and the Gateway API's), NAMESPACE first
// with -A, AGE from the object's creation.

// kubeColumns are a kind's columns after NAME and before AGE (AGE last for every kind
// but those whose CRD puts it elsewhere), and how to read them from an object.
type kubeColumns struct {
	heads []string
	cells func(obj map[string]any) []string
	// noAge: the kind's table has no AGE column.
	noAge bool
	// blank: an empty cell stays blank (kubectl's printer for the kind leaves it so)
	// rather than <none>.
	blank bool
}

// kubeTables are kubectl's columns by the lab's kind name.
var kubeTables = map[string]kubeColumns{
	"Service": {heads: []string{"TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)"}, cells: serviceCells},
	"Deployment": {heads: []string{"READY", "UP-TO-DATE", "AVAILABLE"}, cells: func(o map[string]any) []string {
		want := intAt(o, 1, "spec", "replicas")
		return []string{fmt.Sprintf("%d/%d", intAt(o, 0, "status", "readyReplicas"), want), fmt.Sprint(intAt(o, 0, "status", "updatedReplicas")), fmt.Sprint(intAt(o, 0, "status", "availableReplicas"))}
	}},
	"ReplicaSet": {heads: []string{"DESIRED", "CURRENT", "READY"}, cells: func(o map[string]any) []string {
		want := intAt(o, 1, "spec", "replicas")
		return []string{fmt.Sprint(want), fmt.Sprint(want), fmt.Sprint(want)}
	}},
	"StatefulSet": {heads: []string{"READY"}, cells: func(o map[string]any) []string {
		want := intAt(o, 1, "spec", "replicas")
		return []string{fmt.Sprintf("%d/%d", want, want)}
	}},
	"DaemonSet": {heads: []string{"DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR"}, cells: func(map[string]any) []string {
		return []string{"1", "1", "1", "1", "1", "<none>"}
	}},
	"Namespace":      {heads: []string{"STATUS"}, cells: func(map[string]any) []string { return []string{"Active"} }},
	"ServiceAccount": {heads: []string{"SECRETS"}, cells: func(map[string]any) []string { return []string{"0"} }},
	"Secret": {heads: []string{"TYPE", "DATA"}, cells: func(o map[string]any) []string {
		typ := strAt(o, "type")
		if typ == "" {
			typ = "Opaque"
		}
		return []string{typ, fmt.Sprint(len(mapAt(o, "data")) + len(mapAt(o, "stringData")))}
	}},
	"ConfigMap": {heads: []string{"DATA"}, cells: func(o map[string]any) []string {
		return []string{fmt.Sprint(len(mapAt(o, "data")) + len(mapAt(o, "binaryData")))}
	}},
	"VirtualService": {heads: []string{"GATEWAYS", "HOSTS"}, cells: func(o map[string]any) []string {
		return []string{listCell(o, "spec", "gateways"), listCell(o, "spec", "hosts")}
	}},
	"DestinationRule": {heads: []string{"HOST"}, cells: func(o map[string]any) []string { return []string{strAt(o, "spec", "host")} }},
	"ServiceEntry": {heads: []string{"HOSTS", "LOCATION", "RESOLUTION"}, cells: func(o map[string]any) []string {
		return []string{listCell(o, "spec", "hosts"), strAt(o, "spec", "location"), strAt(o, "spec", "resolution")}
	}},
	"PeerAuthentication": {heads: []string{"MODE"}, cells: func(o map[string]any) []string { return []string{strAt(o, "spec", "mtls", "mode")} }},
	"AuthorizationPolicy": {heads: []string{"ACTION"}, cells: func(o map[string]any) []string {
		a := strAt(o, "spec", "action")
		if a == "" {
			a = "ALLOW"
		}
		return []string{a}
	}},
	api.GatewayAPIGatewayKind: {heads: []string{"CLASS", "ADDRESS", "PROGRAMMED"}, cells: func(o map[string]any) []string {
		addr := ""
		if as := listAt(o, "status", "addresses"); len(as) > 0 {
			if a, ok := as[0].(map[string]any); ok {
				addr = strAt(a, "value")
			}
		}
		return []string{strAt(o, "spec", "gatewayClassName"), addr, condition(o, "Programmed")}
	}},
	"GatewayClass": {heads: []string{"CONTROLLER", "ACCEPTED"}, cells: func(o map[string]any) []string {
		accepted := condition(o, "Accepted")
		if accepted == "" {
			accepted = "True"
		}
		return []string{strAt(o, "spec", "controllerName"), accepted}
	}},
	"HTTPRoute": {heads: []string{"HOSTNAMES"}, cells: func(o map[string]any) []string { return []string{listCell(o, "spec", "hostnames")} }},
	"GRPCRoute": {heads: []string{"HOSTNAMES"}, cells: func(o map[string]any) []string { return []string{listCell(o, "spec", "hostnames")} }},
	// kubectl's Ingress printer: CLASS <none> when unset, HOSTS the rules' hosts (the
	// first three, then "+ N more..."; "*" when none names one), ADDRESS the load balancer's, PORTS
	// 80 and 443 with TLS.
	"Ingress": {heads: []string{"CLASS", "HOSTS", "ADDRESS", "PORTS"}, cells: ingressCells, blank: true},
	"IngressClass": {heads: []string{"CONTROLLER", "PARAMETERS"}, cells: func(o map[string]any) []string {
		return []string{strAt(o, "spec", "controller"), "<none>"}
	}},
	// Kinds the lab keeps without acting on them (RBAC, budgets, autoscalers).
	"Role":               {heads: []string{"CREATED AT"}, cells: createdAt, noAge: true},
	"ClusterRole":        {heads: []string{"CREATED AT"}, cells: createdAt, noAge: true},
	"RoleBinding":        {heads: []string{"ROLE"}, cells: roleRef},
	"ClusterRoleBinding": {heads: []string{"ROLE"}, cells: roleRef},
	"PodDisruptionBudget": {heads: []string{"MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS"}, cells: func(o map[string]any) []string {
		return []string{intOrString(o, "spec", "minAvailable"), intOrString(o, "spec", "maxUnavailable"), fmt.Sprint(intAt(o, 0, "status", "disruptionsAllowed"))}
	}},
	"HorizontalPodAutoscaler": {heads: []string{"REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS"}, cells: hpaCells},
}

// ingressCells are an Ingress's CLASS, HOSTS, ADDRESS and PORTS as kubectl prints them.
func ingressCells(o map[string]any) []string {
	class := strAt(o, "spec", "ingressClassName")
	if class == "" {
		class = "<none>"
	}
	rules := listAt(o, "spec", "rules")
	var hosts []string
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		if h := strAt(rule, "host"); h != "" && len(hosts) < 3 {
			hosts = append(hosts, h)
		}
	}
	hostCell := strings.Join(hosts, ",")
	switch {
	case len(hosts) == 0:
		hostCell = "*"
	case len(rules) > 3:
		hostCell += fmt.Sprintf(" + %d more...", len(rules)-3)
	}
	var addrs []string
	for _, a := range listAt(o, "status", "loadBalancer", "ingress") {
		in, _ := a.(map[string]any)
		if ip := strAt(in, "ip"); ip != "" {
			addrs = append(addrs, ip)
		} else if h := strAt(in, "hostname"); h != "" {
			addrs = append(addrs, h)
		}
	}
	ports := "80"
	if len(listAt(o, "spec", "tls")) > 0 {
		ports = "80, 443"
	}
	return []string{class, hostCell, strings.Join(addrs, ","), ports}
}

// createdAt is kubectl's CREATED AT of the kinds that print it instead of AGE.
func createdAt(o map[string]any) []string { return []string{strAt(o, "metadata", "creationTimestamp")} }

// roleRef is a binding's ROLE: Role/NAME or ClusterRole/NAME.
func roleRef(o map[string]any) []string {
	return []string{strAt(o, "roleRef", "kind") + "/" + strAt(o, "roleRef", "name")}
}

// intOrString renders an IntOrString field as kubectl does, N/A when unset.
func intOrString(o map[string]any, path ...string) string {
	switch v := at(o, path...).(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(int(v))
	}
	return "N/A"
}

// hpaCells are kubectl's REFERENCE, TARGETS, MINPODS, MAXPODS and REPLICAS of an
// autoscaler, which a lab never runs: each metric's current value is <unknown>.
func hpaCells(o map[string]any) []string {
	var targets []string
	for _, m := range listAt(o, "spec", "metrics") {
		mm, _ := m.(map[string]any)
		name := strAt(mm, "resource", "name")
		switch {
		case at(mm, "resource", "target", "averageUtilization") != nil:
			targets = append(targets, fmt.Sprintf("%s: <unknown>/%d%%", name, intAt(mm, 0, "resource", "target", "averageUtilization")))
		case name != "":
			targets = append(targets, name+": <unknown>")
		}
	}
	if v := intAt(o, -1, "spec", "targetCPUUtilizationPercentage"); v >= 0 { // autoscaling/v1
		targets = append(targets, fmt.Sprintf("cpu: <unknown>/%d%%", v))
	}
	return []string{strAt(o, "spec", "scaleTargetRef", "kind") + "/" + strAt(o, "spec", "scaleTargetRef", "name"), strings.Join(targets, ", "),
		fmt.Sprint(intAt(o, 1, "spec", "minReplicas")), fmt.Sprint(intAt(o, 0, "spec", "maxReplicas")), fmt.Sprint(intAt(o, 0, "status", "currentReplicas"))}
}

// getTable prints the objects of kind (in cfg's namespace, "" for every one; named name
// unless "") as kubectl get's table.
func getTable(ctx context.Context, c *api.Client, kind api.Kind, cfg *getConfig, name string, out io.Writer) error {
	objs, err := c.KubeObjects(ctx, kind.Kind, cfg.namespace, name, cfg.selector)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		if name != "" {
			return notFoundAmong(ctx, c, kind, cfg.namespace, name)
		}
		return noResources(cfg.namespace, cfg.errOut)
	}
	form := kubeTableForm{withNamespace: cfg.namespace == "" && !clusterScoped(kind), labelCols: cfg.labelCols}
	return printKubeTable(out, kind, objs, form, time.Now())
}

// notFoundAmong is kubectl's NotFound for a named object, with the names the lab does
// hold of that kind in the namespace.
func notFoundAmong(ctx context.Context, c *api.Client, kind api.Kind, namespace, name string) error {
	err := notFound(kind, name)
	objs, lerr := c.KubeObjects(ctx, kind.Kind, namespace, "", "")
	if lerr != nil {
		return err
	}
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.Name
	}
	where := "in " + namespace
	if namespace == "" {
		where = "in every namespace"
	}
	return fmt.Errorf("%w (the lab's %s %s: %s)", err, kind.Resource(true), where, validList(names))
}

// noResources is kubectl's note for an empty list (on stderr; not an error).
func noResources(namespace string, errOut io.Writer) error {
	if namespace == "" {
		fmt.Fprintln(errOut, "No resources found")
		return nil
	}
	fmt.Fprintf(errOut, "No resources found in %s namespace.\n", namespace)
	return nil
}

// kubeTableForm is how printKubeTable lays a table out.
type kubeTableForm struct {
	withNamespace bool         // -A's NAMESPACE column
	typedNames    bool         // names as kind/name (kubectl get all)
	labelCols     labelColumns // -L's and --show-labels' columns, last
}

// printKubeTable writes objs of one kind as kubectl's table, in form.
func printKubeTable(w io.Writer, kind api.Kind, objs []api.KubeObject, form kubeTableForm, now time.Time) error {
	cols := kubeTables[kind.Kind]
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	heads := append([]string{"NAME"}, cols.heads...)
	if form.withNamespace {
		heads = append([]string{"NAMESPACE"}, heads...)
	}
	if !cols.noAge {
		heads = append(heads, "AGE")
	}
	heads = append(heads, form.labelCols.heads()...)
	fmt.Fprintln(tw, strings.Join(heads, "\t"))
	for _, o := range objs {
		var obj map[string]any
		if err := json.Unmarshal(o.Object, &obj); err != nil {
			return fmt.Errorf("read %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
		}
		name := o.Name
		if form.typedNames {
			name = kind.Resource(false) + "/" + name
		}
		row := []string{name}
		if form.withNamespace {
			row = append([]string{o.Namespace}, row...)
		}
		if cols.cells != nil {
			for _, cell := range cols.cells(obj) {
				if cell == "" && !cols.blank {
					cell = "<none>"
				}
				row = append(row, cell)
			}
		}
		if !cols.noAge {
			row = append(row, age(strAt(obj, "metadata", "creationTimestamp"), now))
		}
		meta, _ := obj["metadata"].(map[string]any)
		row = append(row, form.labelCols.cells(stringMap(meta["labels"]))...)
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// labelColumns are kubectl get's label columns, after every other column: -L's keys,
// one column each headed by the key's last path segment in upper case
// (istio.io/dataplane-mode: DATAPLANE-MODE), each cell the object's value of that label,
// empty when it has none; then --show-labels' LABELS, every label as k=v sorted by key
// (kubectl's, <none> without any).
type labelColumns struct {
	keys []string // -L
	all  bool     // --show-labels
}

// addLabelFlags binds kubectl get's -L and --show-labels to lc.
func addLabelFlags(cmd *cobra.Command, lc *labelColumns) {
	cmd.Flags().StringSliceVarP(&lc.keys, "label-columns", "L", nil, "labels shown as columns of the table, as kubectl's (-L istio.io/dataplane-mode, repeated or comma-separated)")
	cmd.Flags().BoolVar(&lc.all, "show-labels", false, "every label in a last LABELS column, as kubectl's")
}

func (lc labelColumns) heads() []string {
	heads := make([]string, 0, len(lc.keys)+1)
	for _, key := range lc.keys {
		heads = append(heads, strings.ToUpper(key[strings.LastIndex(key, "/")+1:]))
	}
	if lc.all {
		heads = append(heads, "LABELS")
	}
	return heads
}

// cells are one object's cells of lc, from its labels.
func (lc labelColumns) cells(objLabels map[string]string) []string {
	cells := make([]string, 0, len(lc.keys)+1)
	for _, key := range lc.keys {
		cells = append(cells, objLabels[key])
	}
	if lc.all {
		cells = append(cells, labels.FormatLabels(objLabels))
	}
	return cells
}

// age renders a creation time as kubectl's AGE ("42s", "5m3s", "2d"), "<unknown>"
// without one.
func age(ts string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// serviceCells are kubectl's TYPE, CLUSTER-IP, EXTERNAL-IP and PORT(S) of a Service.
func serviceCells(o map[string]any) []string {
	typ := strAt(o, "spec", "type")
	if typ == "" {
		typ = "ClusterIP"
	}
	external := "<none>"
	if typ == "ExternalName" {
		external = strAt(o, "spec", "externalName") // kubectl's column holds the alias's target
	}
	if typ == "LoadBalancer" {
		external = "<pending>"
		var ips []string
		for _, in := range listAt(o, "status", "loadBalancer", "ingress") {
			if m, ok := in.(map[string]any); ok {
				ips = append(ips, strAt(m, "ip")+strAt(m, "hostname"))
			}
		}
		if len(ips) > 0 {
			external = strings.Join(ips, ",")
		}
	}
	var ports []string
	for _, p := range listAt(o, "spec", "ports") {
		m, ok := p.(map[string]any)
		if !ok {
			continue
		}
		proto := strAt(m, "protocol")
		if proto == "" {
			proto = "TCP"
		}
		port := fmt.Sprint(intAt(m, 0, "port"))
		if np := intAt(m, 0, "nodePort"); np != 0 {
			port += fmt.Sprintf(":%d", np)
		}
		ports = append(ports, port+"/"+proto)
	}
	cell := strings.Join(ports, ",")
	if cell == "" {
		cell = "<none>"
	}
	clusterIP := strAt(o, "spec", "clusterIP")
	if clusterIP == "" {
		clusterIP = "<none>"
	}
	return []string{typ, clusterIP, external, cell}
}

// condition returns the status of the object's status condition of type typ.
func condition(o map[string]any, typ string) string {
	for _, c := range listAt(o, "status", "conditions") {
		if m, ok := c.(map[string]any); ok && strAt(m, "type") == typ {
			return strAt(m, "status")
		}
	}
	return ""
}

func at(o map[string]any, path ...string) any {
	var v any = o
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func strAt(o map[string]any, path ...string) string {
	s, _ := at(o, path...).(string)
	return s
}

func intAt(o map[string]any, def int, path ...string) int {
	if f, ok := at(o, path...).(float64); ok {
		return int(f)
	}
	return def
}

func listAt(o map[string]any, path ...string) []any {
	l, _ := at(o, path...).([]any)
	return l
}

func mapAt(o map[string]any, path ...string) map[string]any {
	m, _ := at(o, path...).(map[string]any)
	return m
}

// listCell renders a list of strings as kubectl's printer columns do: ["a","b"].
func listCell(o map[string]any, path ...string) string {
	l := listAt(o, path...)
	if len(l) == 0 {
		return ""
	}
	b, err := json.Marshal(l)
	if err != nil {
		return ""
	}
	return string(b)
}

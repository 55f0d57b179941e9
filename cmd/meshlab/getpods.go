package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshlab/meshlab/api"
)

// isPodsKind reports whether kind is kubectl's spelling of pods.
func isPodsKind(kind string) bool {
	switch strings.ToLower(kind) {
	case "pods", "pod", "po":
		return true
	}
	return false
}

// getPods prints the lab's pods as kubectl get pods does: NAME READY STATUS RESTARTS AGE
// (NAMESPACE first with -A; -o wide adds IP, NODE, NOMINATED NODE and READINESS GATES).
// READY counts the pod's containers as its Kubernetes view has them (a gateway's one
// istio-proxy; an app and its sidecar), RESTARTS the sidecar's. With a name, only that
// pod (an unknown name is kubectl's NotFound). -o json and -o yaml print the pods'
// Kubernetes view (Pod objects, a List without a name), as kubectl does.
func getPods(ctx context.Context, c *api.Client, cfg *getConfig, name string, out io.Writer) error {
	return getPodsWhere(ctx, c, cfg, name, out, func(api.PodStatus) bool { return true })
}

// getPodsWhere is getPods of the pods keep reports.
func getPodsWhere(ctx context.Context, c *api.Client, cfg *getConfig, name string, out io.Writer, keep func(api.PodStatus) bool) error {
	pods, err := c.Pods(ctx)
	if err != nil {
		return err
	}
	var shown []api.PodStatus
	for _, p := range pods {
		if (name == "" || p.Name == name) && (cfg.namespace == "" || p.Namespace == cfg.namespace) && keep(p) {
			shown = append(shown, p)
		}
	}
	if name != "" && len(shown) == 0 && cfg.selector == "" {
		return notFoundAmong(ctx, c, api.Kind{Kind: "Pod"}, cfg.namespace, name)
	}
	if len(shown) == 0 && (cfg.output == "" || cfg.output == "text" || cfg.output == "wide") {
		return noResources(cfg.namespace, cfg.errOut)
	}
	views, viewErr := c.KubeObjects(ctx, "pod", cfg.namespace, name, "")
	if cfg.output == "json" || cfg.output == "yaml" {
		// kubectl prints Pod objects: the lab's Kubernetes view of the pods shown, as
		// -o jsonpath reads them.
		if viewErr != nil {
			return viewErr
		}
		keep := make(map[string]bool, len(shown))
		for _, p := range shown {
			keep[p.Namespace+"/"+p.Name] = true
		}
		var objs []json.RawMessage
		for _, v := range views {
			if keep[v.Namespace+"/"+v.Name] {
				objs = append(objs, v.Object)
			}
		}
		return printKube(out, cfg.output, objs, name != "")
	}
	created := map[string]string{}
	labels := map[string]map[string]string{} // by namespace/name, for -L
	containers := map[string][]string{}      // by namespace/name: the containers READY counts
	if viewErr == nil {
		for _, v := range views {
			var m struct {
				Metadata struct {
					CreationTimestamp string            `json:"creationTimestamp"`
					Labels            map[string]string `json:"labels"`
				} `json:"metadata"`
				Spec struct {
					Containers []struct{ Name string } `json:"containers"`
				} `json:"spec"`
			}
			if json.Unmarshal(v.Object, &m) == nil {
				created[v.Namespace+"/"+v.Name] = m.Metadata.CreationTimestamp
				labels[v.Namespace+"/"+v.Name] = m.Metadata.Labels
				for _, ct := range m.Spec.Containers {
					containers[v.Namespace+"/"+v.Name] = append(containers[v.Namespace+"/"+v.Name], ct.Name)
				}
			}
		}
	}
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	heads := []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}
	if cfg.namespace == "" {
		heads = append([]string{"NAMESPACE"}, heads...)
	}
	if cfg.output == "wide" {
		heads = append(heads, "IP", "NODE", "NOMINATED NODE", "READINESS GATES")
	}
	heads = append(heads, cfg.labelCols.heads()...)
	fmt.Fprintln(tw, strings.Join(heads, "\t"))
	now := time.Now()
	for _, p := range shown {
		n, ready := readyOf(containers[p.Namespace+"/"+p.Name], p.Sidecar), 0
		status := "NotReady"
		if p.Ready {
			ready, status = n, "Running"
		} else if p.Message != "" {
			status = p.Message
		}
		name := p.Name
		if cfg.typedNames {
			name = "pod/" + name
		}
		row := []string{name, fmt.Sprintf("%d/%d", ready, n), status, fmt.Sprint(p.Restarts), age(created[p.Namespace+"/"+p.Name], now)}
		if cfg.namespace == "" {
			row = append([]string{p.Namespace}, row...)
		}
		if cfg.output == "wide" {
			row = append(row, p.IP.String(), "meshlab", "<none>", "<none>")
		}
		podLabels := labels[p.Namespace+"/"+p.Name]
		row = append(row, cfg.labelCols.cells(podLabels)...)
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// readyOf is how many containers a pod's READY counts: those its Kubernetes view lists (a
// gateway's one istio-proxy; an app and its sidecar), the istio-proxy of a proxyless gRPC
// pod (whose agent the view leaves out) among them; the app and its sidecar when the view
// has no such pod.
func readyOf(listed []string, sidecar bool) int {
	n := len(listed)
	if n == 0 {
		n = 1
	}
	if sidecar && !slices.Contains(listed, "istio-proxy") {
		n++
	}
	return n
}

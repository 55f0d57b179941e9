package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

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

// getPods prints the lab's pods as kubectl get pods -o wide does: READY counts the app and
// the sidecar, RESTARTS the sidecar's. With a name, only that pod (an unknown name is
// an error listing the pods).
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
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
		if (name == "" || p.Name == name) && (cfg.namespace == "" || p.Namespace == cfg.namespace) && keep(p) {
			shown = append(shown, p)
		}
	}
	if name != "" && len(shown) == 0 && cfg.selector == "" {
		return unknownName("pod", name, names)
	}
	return printOutput(out, cfg.output, shown, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
		fmt.Fprintln(tw, "NAME\tNAMESPACE\tREADY\tSTATUS\tRESTARTS\tIP")
		for _, p := range shown {
			containers, ready := 1, 0
			if p.Sidecar {
				containers = 2
			}
			status := "NotReady"
			if p.Ready {
				ready, status = containers, "Running"
			} else if p.Message != "" {
				status = p.Message
			}
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%d\t%s\n", p.Name, p.Namespace, ready, containers, status, p.Restarts, p.IP)
		}
		return tw.Flush()
	})
}

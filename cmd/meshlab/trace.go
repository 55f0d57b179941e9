package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// newTraceCmd returns `meshlab trace POD URL|HOST:PORT`: one request from the pod, its path
// hop by hop with what produced each hop.
func newTraceCmd(g *globalFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "trace POD URL|HOST:PORT",
		Short: "Send one request from a pod and show its path: capture rules, listeners, routes, clusters, mTLS, RBAC",
		Long: `Sends one GET from the pod's network namespace (captured like its app's traffic) and
prints the request's path: the capture rules it hit in the source pod (nat packet counter
deltas), the source sidecar's listener, filter chain, virtual host, route and cluster, each
with the config object it was generated from, the endpoint chosen, whether the hop was
mTLS and with which peer identity, then the destination pod's capture rules, inbound
listener and filter chain, RBAC decision, and the app's answer. From an ambient pod (or to
one), the hops are the node's ztunnel's: istio-cni's in-pod rule that sent the connection
to ztunnel's 15001, ztunnel's outbound side (HBONE to the destination pod's 15008, the
peer's identity), the destination's in-pod chains, ztunnel's inbound side with its L4
policy verdict, each with ztunnel's access log line for the connection.`,
		Example:           "  meshlab trace frontend-v1 http://backend:8080/\n  meshlab trace frontend-v1 backend:8080 -o json\n  meshlab trace curl-5f9cc9ddf9-65db7 http://productpage:9080/productpage   # an ambient pod",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completePods(g, false),
		SilenceUsage:      true,
		SilenceErrors:     true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return queryLab(cmd, g, output, func(ctx context.Context, c *api.Client) (api.TraceResult, error) {
				return c.Trace(ctx, api.TraceRequest{Pod: args[0], Target: args[1]})
			}, printTrace)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// printTrace renders a trace as indented text, one block per hop.
func printTrace(w io.Writer, r api.TraceResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s from %s (x-request-id %s) -> %s\n", r.URL, r.Pod, r.RequestID, r.Address)
	if r.Error != "" {
		fmt.Fprintf(&b, "  error: %s\n", r.Error)
	}
	for i, h := range r.Hops {
		switch h.Kind {
		case api.HopCapture:
			fmt.Fprintf(&b, "%d. %s: capture rules hit\n", i+1, h.Pod)
			if len(h.Rules) == 0 {
				b.WriteString("     (no nat rule counted a packet)\n")
			}
			for _, rl := range h.Rules {
				fmt.Fprintf(&b, "     %-18s +%d  %s\n", rl.Chain, rl.Packets, rl.Comment)
			}
			if h.Notes != "" {
				fmt.Fprintf(&b, "     note: %s\n", h.Notes)
			}
		case api.HopZtunnel:
			printZtunnelHop(&b, i, h)
		case api.HopProxy:
			fmt.Fprintf(&b, "%d. %s: sidecar, %s\n", i+1, h.Pod, h.Direction)
			res := func(label string, x *api.TraceResource) {
				if x == nil {
					return
				}
				name := x.Name
				if name == "" {
					name = "(unnamed)"
				}
				fmt.Fprintf(&b, "     %-13s %s", label, name)
				if x.Origin != "" {
					fmt.Fprintf(&b, "  (from %s)", x.Origin)
				}
				b.WriteString("\n")
			}
			res("listener", h.Listener)
			res("filter chain", h.FilterChain)
			res("virtual host", h.VirtualHost)
			res("route", h.Route)
			res("cluster", h.Cluster)
			if h.Endpoint != "" {
				fmt.Fprintf(&b, "     %-13s %s\n", "endpoint", h.Endpoint)
			}
			if h.MTLS {
				fmt.Fprintf(&b, "     %-13s yes, peer %s\n", "mTLS", h.PeerIdentity)
			} else {
				fmt.Fprintf(&b, "     %-13s no\n", "mTLS")
			}
			if h.RBAC != "" {
				fmt.Fprintf(&b, "     %-13s %s\n", "RBAC", h.RBAC)
			}
			if h.UpstreamServiceTimeMs != nil {
				fmt.Fprintf(&b, "     %-13s %d ms\n", "upstream time", *h.UpstreamServiceTimeMs)
			}
			if h.DurationMs != nil {
				fmt.Fprintf(&b, "     %-13s %d ms\n", "duration", *h.DurationMs)
			}
			if h.ResponseFlags != "" {
				fmt.Fprintf(&b, "     %-13s %s\n", "flags", h.ResponseFlags)
			}
			if h.AccessLog != "" {
				fmt.Fprintf(&b, "     %-13s %s\n", "access log", strings.TrimRight(h.AccessLog, "\n"))
			}
			if h.Notes != "" {
				fmt.Fprintf(&b, "     %-13s %s\n", "note", h.Notes)
			}
			keys := make([]string, 0, len(h.Stats))
			for k := range h.Stats {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if len(keys) > 0 {
				fmt.Fprintf(&b, "     %-13s %s\n", "stats", fmt.Sprintf("%d counters rose (-o json lists them)", len(keys)))
			}
		case api.HopApp:
			fmt.Fprintf(&b, "%d. %s: app answered %d", i+1, h.Pod, h.Status)
			if h.Version != "" {
				fmt.Fprintf(&b, " (version %s)", h.Version)
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "status %d in %.1f ms\n", r.Status, r.DurationMs)
	_, err := io.WriteString(w, b.String())
	return err
}

// printZtunnelHop renders one side of ztunnel's handling of an ambient pod's connection.
func printZtunnelHop(b *strings.Builder, i int, h api.TraceHop) {
	fmt.Fprintf(b, "%d. %s: ztunnel, %s\n", i+1, h.Pod, h.Direction)
	line := func(label, v string) {
		if v != "" {
			fmt.Fprintf(b, "     %-13s %s\n", label, v)
		}
	}
	if h.Listener != nil {
		line("listener", h.Listener.Name)
	}
	line("protocol", h.Protocol)
	line("endpoint", h.Endpoint)
	line(":authority", h.Target)
	if h.Protocol != "" {
		if h.MTLS {
			line("mTLS", "yes, peer "+h.PeerIdentity)
		} else {
			line("mTLS", "no")
		}
	}
	if h.RBAC != "" {
		line("L4 policy", h.RBAC)
	}
	if h.DurationMs != nil {
		line("duration", fmt.Sprintf("%d ms", *h.DurationMs))
	}
	line("access log", strings.TrimRight(h.AccessLog, "\n"))
	line("note", h.Notes)
}

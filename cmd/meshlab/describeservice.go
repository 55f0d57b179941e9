package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

func newDescribeServiceCmd(g *globalFlags) *cobra.Command {
	var output, namespace string
	cmd := &cobra.Command{
		Use:               "service NAME",
		Aliases:           []string{"svc"},
		Short:             "Show a service: ports, VIP, pods and endpoint health, and the Istio objects that apply to it",
		Long:              "Show a service as the lab computes it from the model its proxies' config is generated from: each port's mTLS mode is the one the selected pods' proxies enforce.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeServices(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			var view api.ServiceView
			if err := queryLab(cmd, g, output, func(ctx context.Context, c *api.Client) (api.ServiceView, error) {
				v, err := c.DescribeService(ctx, namespace, args[0])
				view = v
				return v, err
			}, printServiceView); err != nil || output != "" {
				return err
			}
			return describeTrafficPolicy(cmd, g, view)
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the service's namespace (needed only when the name is in several)")
	return cmd
}

func printServiceView(w io.Writer, v api.ServiceView) error {
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
	fmt.Fprintln(tw, "  NAME\tPORT\tTARGET\tPROTOCOL\tMTLS")
	for _, p := range v.Ports {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\n", orDash(p.Name), p.Port, p.TargetPort, p.Protocol, p.MTLS)
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

// describeTrafficPolicy adds kubectl describe's External Traffic Policy line for a
// gateway Service whose policy was patched (patch.go), and what it does in a lab on
// stderr: nothing, as a client's source address already reaches the gateway.
func describeTrafficPolicy(cmd *cobra.Command, g *globalFlags, v api.ServiceView) error {
	c, err := g.apiClient()
	if err != nil {
		return err
	}
	defer c.Close()
	objs, err := c.KubeObjects(cmd.Context(), "Service", v.Namespace, v.Name, "")
	if err != nil || len(objs) != 1 {
		return nil //nolint:nilerr // the line is kubectl's extra; the description above stands without it
	}
	var svc struct {
		Spec struct {
			ExternalTrafficPolicy string `json:"externalTrafficPolicy"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(objs[0].Object, &svc); err != nil || svc.Spec.ExternalTrafficPolicy == "" {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "External Traffic Policy:  %s\n", svc.Spec.ExternalTrafficPolicy)
	fmt.Fprintf(cmd.ErrOrStderr(), "Note (meshlab): externalTrafficPolicy %s is kept and shown, and changes nothing in a lab: "+
		"a client reaches the gateway at its VIP with its own source address (no node hop, no SNAT), which is what Local keeps in a cluster, "+
		"so the gateway's authorization policies see the client's IP either way\n", svc.Spec.ExternalTrafficPolicy)
	return nil
}

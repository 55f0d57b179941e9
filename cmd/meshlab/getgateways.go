package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshlab/meshlab/api"
)

// printGatewayAPIGateways prints Gateway API Gateways as `kubectl get gateways.gateway.
// networking.k8s.io` does, from the status the lab's Kubernetes view gives them
// (lab/kubeview.go): NAME, CLASS, ADDRESS (the VIP of the automated deployment's
// Service "<gateway>-istio"), PROGRAMMED (True once that deployment's pod is ready) and
// AGE, which meshlab does not record (kubectl's "<unknown>" for an object without a
// creation time).
func printGatewayAPIGateways(ctx context.Context, c *api.Client, objs []api.ConfigObject, out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCLASS\tADDRESS\tPROGRAMMED\tAGE")
	for _, o := range objs {
		views, err := c.KubeObjects(ctx, "gtw", o.Namespace, o.Name, "")
		if err != nil {
			return err
		}
		if len(views) != 1 {
			return fmt.Errorf("read Gateway %s/%s: the lab has %d", o.Namespace, o.Name, len(views))
		}
		var gw gwv1.Gateway
		if err := json.Unmarshal(views[0].Object, &gw); err != nil {
			return fmt.Errorf("read Gateway %s/%s: %w", o.Namespace, o.Name, err)
		}
		addr := "<pending>"
		if len(gw.Status.Addresses) > 0 {
			addr = gw.Status.Addresses[0].Value
		}
		programmed := "Unknown"
		for _, cond := range gw.Status.Conditions {
			if cond.Type == string(gwv1.GatewayConditionProgrammed) {
				programmed = string(cond.Status)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", o.Name, gw.Spec.GatewayClassName, addr, programmed, "<unknown>")
	}
	return tw.Flush()
}

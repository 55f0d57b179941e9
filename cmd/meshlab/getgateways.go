package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/lab"
)

// printGatewayAPIGateways prints Gateway API Gateways as `kubectl get gateways.gateway.
// networking.k8s.io` does: NAME, CLASS, ADDRESS (the VIP of the automated deployment's
// Service "<gateway>-istio", from the name table the lab serves its agents), PROGRAMMED
// (True once that deployment's pod is ready) and AGE, which meshlab does not record
// (kubectl's "<unknown>" for an object without a creation time).
func printGatewayAPIGateways(ctx context.Context, g *globalFlags, c *api.Client, objs []api.ConfigObject, out io.Writer) error {
	pods, err := c.Pods(ctx)
	if err != nil {
		return err
	}
	var nt api.NameTable
	if len(pods) > 0 {
		labName, _ := g.labName()
		_ = unixGetJSON(ctx, lab.PathsFor(g.runRoot, labName).APISocket(), "/v1/agents/"+pods[0].Name+"/nametable?version=0", &nt)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCLASS\tADDRESS\tPROGRAMMED\tAGE")
	for _, o := range objs {
		var gw struct {
			Spec struct {
				GatewayClassName string `json:"gatewayClassName"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(o.Object, &gw); err != nil {
			return fmt.Errorf("read %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
		}
		svc := config.GatewayAPIServiceName(o.Name)
		addr := "<pending>"
		if a := nt.Names[svc+"."+o.Namespace+".svc.cluster.local"]; len(a) > 0 {
			addr = a[0].String()
		}
		programmed := "False"
		for _, p := range pods {
			if p.Namespace == o.Namespace && strings.HasPrefix(p.Name, svc+"-") && p.Ready {
				programmed = "True"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", o.Name, gw.Spec.GatewayClassName, addr, programmed, "<unknown>")
	}
	return tw.Flush()
}

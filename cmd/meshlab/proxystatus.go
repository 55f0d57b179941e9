package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// proxyStatusTypes are the xDS types shown, in istioctl's column order.
var proxyStatusTypes = []string{"CDS", "LDS", "EDS", "RDS"}

func newProxyStatusCmd(g *globalFlags) *cobra.Command {
	var (
		output string
		istiod bool
	)
	cmd := &cobra.Command{
		Use:   "proxy-status",
		Short: "Show whether every proxy runs the latest config (SYNCED, STALE or NACK), like istioctl proxy-status",
		Long: `Shows, for every proxy, whether it runs the latest config of each type, as the lab's
xDS server saw it (what it relayed, with --control-plane=istiod). --istiod shows istiod's
own view instead, read from its /debug/syncz as istioctl proxy-status does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if istiod {
				return queryLab(cmd, g, output, istiodProxyStatus, printIstiodProxyStatus) // istiod.go
			}
			return queryLab(cmd, g, output, func(ctx context.Context, c *api.Client) ([]api.ProxyStatus, error) {
				st, err := c.ProxyStatus(ctx)
				return nonNil(st), err
			}, printProxyStatus)
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().BoolVar(&istiod, "istiod", false, "istiod's own view (its /debug/syncz), with --control-plane=istiod")
	return cmd
}

// printProxyStatus writes the table, then one line per NACK with the proxy's error, and
// one per proxy whose config the control plane could not generate (PUSH ERROR).
func printProxyStatus(w io.Writer, st []api.ProxyStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCDS\tLDS\tEDS\tRDS\tVERSION\tCONNECTED")
	var nacks, pushErrs []string
	for _, ps := range st {
		name := ps.Pod + "." + ps.Namespace
		if ps.Pod == "" {
			name = ps.NodeID
		}
		// A ztunnel is sent WDS and WADS only: istioctl shows the Envoy types IGNORED and
		// the ztunnel by its pod (the node id's third field).
		ztunnel := strings.HasPrefix(ps.NodeID, "ztunnel~")
		if f := strings.Split(ps.NodeID, "~"); ztunnel && len(f) == 4 {
			name = f[2]
		}
		var cols, versions []string
		types := proxyStatusTypes
		if ztunnel {
			types = []string{"WDS", "WADS"}
			cols = []string{"IGNORED", "IGNORED", "IGNORED", "IGNORED"}
		}
		for _, typ := range types {
			t, ok := ps.Types[typ]
			if ztunnel {
				if ok && t.State() == "NACK" {
					nacks = append(nacks, fmt.Sprintf("%s %s: %s", name, typ, t.NackError))
				}
				if ok && t.Acked != "" && !slices.Contains(versions, t.Acked) {
					versions = append(versions, t.Acked)
				}
				continue
			}
			if !ok {
				cols = append(cols, "NOT SENT")
				continue
			}
			cols = append(cols, t.State())
			if t.State() == "NACK" {
				nacks = append(nacks, fmt.Sprintf("%s %s: %s", name, typ, t.NackError))
			}
			if t.Acked != "" && !slices.Contains(versions, t.Acked) {
				versions = append(versions, t.Acked)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", name, strings.Join(cols, "\t"), strings.Join(versions, ","), ps.Connected)
		if ps.PushError != "" {
			pushErrs = append(pushErrs, name+": "+ps.PushError)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range nacks {
		fmt.Fprintln(w, "NACK "+n)
	}
	for _, e := range pushErrs {
		fmt.Fprintln(w, "PUSH ERROR "+e)
	}
	return nil
}

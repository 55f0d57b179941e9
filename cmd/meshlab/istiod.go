package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// newXCmd is istioctl's experimental group as far as meshlab has it: x internal-debug.
func newXCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "x",
		Aliases: []string{"experimental"},
		Short:   "Experimental commands, as istioctl x",
	}
	// waypoint as istioctl up to 1.23 had it under x (the docs' `istioctl x waypoint apply`).
	xWaypoint := newWaypointCmd(g)
	xWaypoint.Hidden = true
	cmd.AddCommand(newInternalDebugCmd(g), newEnvoyStatsCmd(g), xWaypoint) // envoystats.go
	return cmd
}

// newInternalDebugCmd is `istioctl x internal-debug`: one of istiod's own debug
// endpoints, read through the lab (istiod runs with up --control-plane=istiod).
func newInternalDebugCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "internal-debug ENDPOINT",
		Short: "Print one of istiod's debug endpoints (syncz, config_dump?proxyID=..., push_status, configz, registryz...), as istioctl x internal-debug",
		Long: `Reads istiod's own /debug/ENDPOINT through the lab, as istioctl x internal-debug does,
when the lab's control plane is istiod (meshlab up --control-plane=istiod). ENDPOINT may
carry a query: config_dump?proxyID=<pod>.<namespace> (istiod's proxy id).`,
		Example: `  meshlab x internal-debug syncz
  meshlab x internal-debug 'config_dump?proxyID=frontend-v1-7c9d8-x2x9b.default'
  meshlab x internal-debug push_status`,
		Args:          cobra.ExactArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			body, err := c.IstiodDebug(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			if json.Indent(&buf, body, "", "  ") != nil {
				buf.Reset()
				buf.Write(body)
			}
			buf.WriteByte('\n')
			_, err = cmd.OutOrStdout().Write(buf.Bytes())
			return err
		},
	}
}

// istiodSyncStatus is one proxy of istiod's /debug/syncz, as istioctl proxy-status reads
// it (pilot/pkg/xds's SyncStatus; nonces, not versions).
type istiodSyncStatus struct {
	ClusterID     string `json:"cluster_id,omitempty"`
	ProxyID       string `json:"proxy,omitempty"`
	ProxyType     string `json:"proxy_type,omitempty"`
	IstioVersion  string `json:"istio_version,omitempty"`
	ClusterSent   string `json:"cluster_sent,omitempty"`
	ClusterAcked  string `json:"cluster_acked,omitempty"`
	ListenerSent  string `json:"listener_sent,omitempty"`
	ListenerAcked string `json:"listener_acked,omitempty"`
	RouteSent     string `json:"route_sent,omitempty"`
	RouteAcked    string `json:"route_acked,omitempty"`
	EndpointSent  string `json:"endpoint_sent,omitempty"`
	EndpointAcked string `json:"endpoint_acked,omitempty"`
	ECDSSent      string `json:"extensionconfig_sent,omitempty"`
	ECDSAcked     string `json:"extensionconfig_acked,omitempty"`
}

// istiodProxyStatus reads istiod's /debug/syncz: every proxy as istiod sees it.
func istiodProxyStatus(ctx context.Context, c *api.Client) ([]istiodSyncStatus, error) {
	body, err := c.IstiodDebug(ctx, "syncz")
	if err != nil {
		return nil, err
	}
	out := []istiodSyncStatus{}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("istiod's syncz: %w", err)
	}
	return out, nil
}

// printIstiodProxyStatus is istioctl proxy-status's table of istiod's syncz.
func printIstiodProxyStatus(w io.Writer, st []istiodSyncStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCLUSTER\tCDS\tLDS\tEDS\tRDS\tECDS\tISTIOD\tVERSION")
	for _, s := range st {
		state := xdsState
		if s.ProxyType == "ztunnel" {
			state = ztunnelXDSState
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ProxyID, s.ClusterID,
			state(s.ClusterSent, s.ClusterAcked), state(s.ListenerSent, s.ListenerAcked),
			state(s.EndpointSent, s.EndpointAcked), state(s.RouteSent, s.RouteAcked),
			state(s.ECDSSent, s.ECDSAcked), "meshlab-istiod", s.IstioVersion)
	}
	return tw.Flush()
}

// ztunnelXDSState is xdsState for a ztunnel, which istiod never sends Envoy's types:
// istioctl shows a type not sent to it as IGNORED, not NOT SENT.
func ztunnelXDSState(sent, acked string) string {
	if sent == "" {
		return "IGNORED"
	}
	return xdsState(sent, acked)
}

// xdsState is istioctl's reading of a type's sent and acked nonces.
func xdsState(sent, acked string) string {
	switch {
	case sent == "":
		return "NOT SENT"
	case sent == acked:
		return "SYNCED"
	case acked == "":
		return "STALE (Never Acknowledged)"
	}
	return "STALE"
}

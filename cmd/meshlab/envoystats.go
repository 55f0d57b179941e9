package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/lab"
)

// newEnvoyStatsCmd is istioctl x envoy-stats (x es): a pod's proxy stats from its admin
// API, as the metrics Telemetry API page reads istio_requests_total
// (`istioctl x es POD -oprom`). Output as istioctl's: a header naming the pod, then the
// stats as text, JSON, YAML or Prometheus' exposition format.
func newEnvoyStatsCmd(g *globalFlags) *cobra.Command {
	var output, statsType, namespace string
	cmd := &cobra.Command{
		Use:     "envoy-stats POD|TYPE/NAME[.NAMESPACE]",
		Aliases: []string{"es"},
		Short:   "Print a pod's proxy stats (server or clusters), as istioctl x envoy-stats",
		Example: `  meshlab x envoy-stats productpage-v1 -o prom
  meshlab x es deploy/details --type clusters`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := envoyStatsPath(statsType, output)
			if err != nil {
				return err
			}
			paths, key, err := g.podPathsIn(args[0], namespace, true)
			if err != nil {
				return err
			}
			r, err := lab.ReadRecord(paths)
			if err != nil {
				return err
			}
			p, err := r.FindPod(args[0], namespace)
			if err != nil {
				return err
			}
			b, err := fetchAdmin(cmd.Context(), paths.AgentSocket(key), path)
			if err != nil {
				return fmt.Errorf("failed to execute command on Envoy: %w", err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "\nThe result of pod %s:\n\n", p.Name)
			switch output {
			case "yaml":
				y, err := yaml.JSONToYAML(b)
				if err != nil {
					return err
				}
				_, err = out.Write(y)
				return err
			case "json":
				var pretty bytes.Buffer
				if err := json.Indent(&pretty, b, "", "    "); err != nil {
					return err
				}
				_, err = fmt.Fprintln(out, pretty.String())
				return err
			}
			_, err = out.Write(b)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "short", "output format: one of json, yaml, short, prom")
	cmd.Flags().StringVarP(&statsType, "type", "t", "server", "which stats: server or clusters")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the pod's namespace (POD.NAMESPACE also works)")
	return cmd
}

// envoyStatsPath is the admin path istioctl reads for a --type and --output.
func envoyStatsPath(statsType, output string) (string, error) {
	switch statsType {
	case "server":
		switch output {
		case "", "short":
			return "stats", nil
		case "json", "yaml":
			return "stats?format=json", nil
		case "prom":
			return "stats/prometheus", nil
		case "prom-merged":
			return "", fmt.Errorf("-o prom-merged: meshlab's agent merges no application metrics into the proxy's; use -o prom for the proxy's own")
		}
		return "", fmt.Errorf("unable to match a printer suitable for the output format %s, allowed formats are: json,yaml,short,prom,prom-merged", output)
	case "cluster", "clusters":
		switch output {
		case "", "short":
			return "clusters", nil
		case "json", "yaml":
			return "clusters?format=json", nil
		}
		return "", fmt.Errorf("unable to match a printer suitable for the output format %s, allowed formats are: json,yaml,short", output)
	}
	return "", fmt.Errorf("unknown stats type %s", statsType)
}

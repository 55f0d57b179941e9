package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/dataplane/ztunnelconfig"
)

// zcConfig is what every `ztunnel-config` type reads: where the dump comes from (the
// lab's ztunnel, or a file as istioctl's --file), how to print it, and istioctl's filters.
type zcConfig struct {
	output      string
	file        string
	address     string // workloads
	node        string // workloads: --workload-node
	workloadNS  string // workloads, connections: --workload-namespace
	serviceNS   string // services
	policyNS    string // policies
	direction   string // connections
	raw         bool   // connections
	withHeaders bool   // all
}

// ztunnelConfigTypes are the types `ztunnel-config` shows, with istioctl's names and aliases.
var ztunnelConfigTypes = []struct {
	use     string
	aliases []string
	short   string
}{
	{"all", nil, "every table: workloads, services, policies, certificates, connections"},
	{"workload", []string{"w", "workloads"}, "the workloads ztunnel knows: NAMESPACE, POD NAME, ADDRESS, NODE, WAYPOINT, PROTOCOL (HBONE or TCP)"},
	{"service", []string{"services", "s", "svc"}, "the services ztunnel knows: VIP, waypoint, healthy/all endpoints"},
	{"policy", []string{"policies", "p", "pol"}, "the L4 authorization policies ztunnel enforces: ACTION, SCOPE"},
	{"certificate", []string{"certificates", "certs", "cert"}, "the workload certificates ztunnel holds for its pods' identities"},
	{"connections", []string{"cons"}, "the live connections of every pod ztunnel proxies"},
}

func newZtunnelConfigCmd(g *globalFlags) *cobra.Command {
	cfg := &zcConfig{}
	var names []string
	for _, t := range ztunnelConfigTypes {
		names = append(names, t.use)
	}
	cmd := &cobra.Command{
		Use:     "ztunnel-config TYPE [POD]",
		Aliases: []string{"zc"},
		Short:   "Show the lab's ztunnel's config (its admin /config_dump), like istioctl ztunnel-config",
		Long: `Reads ztunnel's own /config_dump through the lab: what the node proxy of ambient mode
holds, not what the control plane meant. The tables, filters and -o formats are istioctl
ztunnel-config's, checked against istioctl's own writer on the same dumps. A lab has one
ztunnel; a POD argument naming an ambient pod (name[.namespace]) shows only its
workload or connections, as istioctl does.`,
		Example: `  sudo meshlab ztunnel-config workloads
  sudo meshlab zc services --service-namespace default
  sudo meshlab zc policies -o yaml
  sudo meshlab zc connections productpage-v1.default
  sudo meshlab zc all --with-headers
  sudo meshlab zc workloads --file ztunnel-config.json`,
		Args: cobra.ArbitraryArgs,
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return names, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("ztunnel-config needs a TYPE: one of %s", strings.Join(names, ", "))
			}
			return fmt.Errorf("unknown type %q: choose one of %s", args[0], strings.Join(names, ", "))
		},
	}
	cmd.PersistentFlags().StringVarP(&cfg.output, "output", "o", "", "output format: short, json or yaml (default short)")
	cmd.PersistentFlags().StringVarP(&cfg.file, "file", "f", "", "read a saved ztunnel /config_dump instead of the lab's ztunnel")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"short", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	for _, t := range ztunnelConfigTypes {
		cmd.AddCommand(newZtunnelConfigTypeCmd(g, cfg, t.use, t.aliases, t.short))
	}
	return cmd
}

func newZtunnelConfigTypeCmd(g *globalFlags, cfg *zcConfig, use string, aliases []string, short string) *cobra.Command {
	cmd := &cobra.Command{
		Use:     use + " [POD]",
		Aliases: aliases,
		Short:   short,
		Args:    cobra.MaximumNArgs(1),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return podNames(g, false), cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := ztunnelconfig.ParseFormat(cfg.output)
			if err != nil {
				return err
			}
			pod := ""
			if len(args) == 1 {
				pod = args[0]
			}
			return runZtunnelConfig(cmd.Context(), g, cfg, use, pod, format, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	switch use {
	case "workload":
		f.StringVar(&cfg.address, "address", "", "filter workloads by address field")
		f.StringVar(&cfg.workloadNS, "workload-namespace", "", "filter workloads by namespace field")
		f.StringVar(&cfg.node, "workload-node", "", "filter workloads by node")
	case "connections":
		f.StringVar(&cfg.direction, "direction", "", "filter connections by direction (inbound or outbound)")
		f.BoolVar(&cfg.raw, "raw", false, "show IP addresses instead of names")
		f.StringVar(&cfg.workloadNS, "workload-namespace", "", "filter connections by the pod's namespace")
	case "service":
		f.StringVar(&cfg.serviceNS, "service-namespace", "", "filter services by namespace field")
	case "policy":
		f.StringVar(&cfg.policyNS, "policy-namespace", "", "filter policies by namespace field")
	case "all":
		f.BoolVar(&cfg.withHeaders, "with-headers", false, "print a header line before each table")
	}
	return cmd
}

// runZtunnelConfig reads the lab's ztunnel's (or the file's) /config_dump and prints type
// use. A pod argument that is not the ztunnel itself filters workloads and connections
// to that pod, as istioctl does for a workload pod.
func runZtunnelConfig(ctx context.Context, g *globalFlags, cfg *zcConfig, use, pod string, format ztunnelconfig.Format, out io.Writer) error {
	if cfg.direction != "" && cfg.direction != "inbound" && cfg.direction != "outbound" {
		return fmt.Errorf("--direction %q: want inbound or outbound", cfg.direction)
	}
	var body []byte
	if cfg.file != "" {
		b, err := os.ReadFile(cfg.file)
		if err != nil {
			return fmt.Errorf("--file: %w", err)
		}
		body = b
	} else {
		c, err := g.apiClient()
		if err != nil {
			return err
		}
		defer c.Close()
		if body, err = c.ZtunnelConfigDump(ctx); err != nil {
			return err
		}
	}
	d, err := ztunnelconfig.Parse(body)
	if err != nil {
		return err
	}
	name, namespace := "", ""
	if pod != "" && !strings.HasPrefix(pod, "ztunnel") {
		name, namespace, _ = strings.Cut(pod, ".")
	}
	w := ztunnelconfig.Writer{Out: out}
	switch use {
	case "workload":
		f := ztunnelconfig.WorkloadFilter{Address: cfg.address, Node: cfg.node, Namespace: cfg.workloadNS}
		if name != "" {
			f.Name, f.Namespace = name, namespace
		}
		return w.Workloads(d, f, format)
	case "service":
		return w.Services(d, ztunnelconfig.NamespaceFilter{Namespace: cfg.serviceNS}, format)
	case "policy":
		return w.Policies(d, ztunnelconfig.NamespaceFilter{Namespace: cfg.policyNS}, format)
	case "certificate":
		return w.Certificates(d, format)
	case "connections":
		f := ztunnelconfig.ConnectionsFilter{Namespace: cfg.workloadNS, Direction: cfg.direction, Raw: cfg.raw}
		if name != "" {
			f.Workload, f.Namespace = name, namespace
		}
		return w.Connections(d, f, format)
	case "all":
		return w.All(d, cfg.withHeaders, format)
	}
	return fmt.Errorf("unknown type %q", use)
}

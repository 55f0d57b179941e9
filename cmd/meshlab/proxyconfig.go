package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/dataplane/proxyconfig"
)

// pcConfig is what every `proxy-config` type reads: where the proxy's admin output comes
// from (a pod, or a file as istioctl's --file) and how to print it.
type pcConfig struct {
	output string // -o: short, json, yaml
	file   string // -f: a saved /config_dump (or /clusters?format=json for endpoints)
	// istioctl's filters; which apply depends on the type.
	fqdn, subset, direction string
	port                    int
	address, listenerType   string
	verbose                 bool
	routeName               string
	cluster, status         string
	withHeaders             bool
	namespace               string // -n: the pod's namespace, as istioctl's
}

// proxyConfigTypes are the types `proxy-config` shows, with istioctl's names and aliases.
var proxyConfigTypes = []struct {
	use     string
	aliases []string
	short   string
}{
	{"all", []string{"a"}, "every table of the proxy's config (bootstrap, clusters, listeners, routes, secrets, endpoints)"},
	{"bootstrap", []string{"b"}, "the proxy's bootstrap (-o short: its Istio and Envoy versions)"},
	{"cluster", []string{"clusters", "c"}, "the proxy's clusters: SERVICE FQDN, PORT, SUBSET, DIRECTION, TYPE, DESTINATION RULE"},
	{"endpoint", []string{"endpoints", "ep"}, "every host of every cluster with its health and outlier state, from the proxy's /clusters"},
	{"listener", []string{"listeners", "l"}, "the proxy's listeners, one row per filter chain with its MATCH and DESTINATION"},
	{"route", []string{"routes", "r"}, "the proxy's routes: NAME, VHOST NAME, DOMAINS, MATCH, VIRTUAL SERVICE"},
	{"secret", []string{"secrets", "s"}, "the proxy's SDS secrets with their certificates' validity, serial number and dates"},
}

func proxyConfigTypeNames() []string {
	var out []string
	for _, t := range proxyConfigTypes {
		out = append(out, t.use)
		out = append(out, t.aliases...)
	}
	return out
}

func newProxyConfigCmd(g *globalFlags) *cobra.Command {
	cfg := &pcConfig{}
	cmd := &cobra.Command{
		Use:     "proxy-config TYPE POD",
		Aliases: []string{"pc"},
		Short:   "Show a pod's proxy config as the proxy holds it (its admin /config_dump), like istioctl proxy-config",
		Long: `Reads the proxy's own /config_dump (and /clusters for endpoints) through the pod's agent:
this is the proxy's truth, not the control plane's intent. The tables, filters and -o
formats are istioctl proxy-config's, checked against istioctl's own code on the same
dumps. TYPE is one of all, bootstrap, cluster(s), endpoint(s), listener(s), route(s),
secret(s). The lab is --lab: in route and all, --name is istioctl's route filter.`,
		Example: `  sudo meshlab proxy-config clusters frontend-v1 --direction outbound
  sudo meshlab proxy-config routes productpage-v1 --name 9080 -o yaml
  sudo meshlab pc listeners productpage-v1 --port 15006
  sudo meshlab proxy-config endpoints productpage-v1 --cluster "outbound|9080|v1|reviews.default.svc.cluster.local"
  sudo meshlab proxy-config secret frontend-v1 --lab second`,
		Args: cobra.ArbitraryArgs,
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return proxyConfigTypeNames(), cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("proxy-config needs a TYPE: one of %s", strings.Join(proxyConfigTypeNames(), ", "))
			}
			return fmt.Errorf("unknown type %q: choose one of %s", args[0], strings.Join(proxyConfigTypeNames(), ", "))
		},
	}
	// istioctl's --name filters routes; declared here, it shadows the global --name
	// (the lab, in every other verb). In route and all it is istioctl's filter; in the
	// types where istioctl has none, it still names the lab.
	cmd.PersistentFlags().StringVar(&cfg.routeName, "name", "", "route and all: filter routes by route name, as istioctl; other types: the lab, as --lab")
	cmd.PersistentFlags().StringVarP(&cfg.output, "output", "o", "", "output format: short, json or yaml (default: short; json for bootstrap)")
	cmd.PersistentFlags().StringVarP(&cfg.namespace, "namespace", "n", "", "the pod's namespace, as istioctl's (needed only when its name is in several; POD.NAMESPACE also works)")
	cmd.PersistentFlags().StringVarP(&cfg.file, "file", "f", "", "read a saved /config_dump (for endpoints: /clusters?format=json) instead of a pod's proxy")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"short", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	for _, t := range proxyConfigTypes {
		cmd.AddCommand(newProxyConfigTypeCmd(g, cfg, t.use, t.aliases, t.short))
	}
	cmd.AddCommand(newProxyConfigLogCmd(g, cfg)) // proxyconfiglog.go
	return cmd
}

func newProxyConfigTypeCmd(g *globalFlags, cfg *pcConfig, use string, aliases []string, short string) *cobra.Command {
	cmd := &cobra.Command{
		Use:     use + " POD",
		Aliases: aliases,
		Short:   short,
		Args: func(_ *cobra.Command, args []string) error {
			if (len(args) == 1) == (cfg.file != "") {
				return fmt.Errorf("%s takes a pod name or --file, one of them", use)
			}
			return nil
		},
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return podNames(g, true), cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.routeName != "" && use != "route" && use != "all" {
				// istioctl has no --name here, so it keeps its old meaning: the lab.
				if g.lab != "" && g.lab != cfg.routeName {
					return fmt.Errorf("--lab %s and --name %s name different labs: use --lab alone", g.lab, cfg.routeName)
				}
				g.name = cfg.routeName
			}
			if use == "bootstrap" && cfg.output == "" {
				cfg.output = "json" // istioctl's default for bootstrap
			}
			format, err := proxyconfig.ParseFormat(cfg.output)
			if err != nil {
				return err
			}
			pod := ""
			if len(args) == 1 {
				pod = args[0]
			}
			return runProxyConfig(cmd.Context(), g, cfg, use, pod, format, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	switch use {
	case "cluster", "all":
		f.StringVar(&cfg.fqdn, "fqdn", "", "filter clusters by substring of Service FQDN field")
		f.StringVar(&cfg.direction, "direction", "", "filter clusters by Direction field (inbound or outbound)")
		f.StringVar(&cfg.subset, "subset", "", "filter clusters by substring of Subset field")
	}
	switch use {
	case "cluster":
		f.IntVar(&cfg.port, "port", 0, "filter clusters by Port field")
	case "listener":
		f.IntVar(&cfg.port, "port", 0, "filter listeners by Port field")
	case "endpoint":
		f.IntVar(&cfg.port, "port", 0, "filter endpoints by Port field")
	case "all":
		f.IntVar(&cfg.port, "port", 0, "filter clusters, listeners and endpoints by Port field")
		f.BoolVar(&cfg.withHeaders, "with-headers", false, "print a header line before each table")
	}
	switch use {
	case "listener", "all", "endpoint":
		f.StringVar(&cfg.address, "address", "", "filter "+map[bool]string{true: "endpoints", false: "listeners"}[use == "endpoint"]+" by address field")
	}
	switch use {
	case "listener", "all":
		f.StringVar(&cfg.listenerType, "type", "", "filter listeners by type field (HTTP, TCP, HTTP+TCP)")
	}
	switch use {
	case "listener", "route", "all":
		f.BoolVar(&cfg.verbose, "verbose", true, "output more information (MATCH and DESTINATION, VIRTUAL SERVICE)")
	}
	if use == "endpoint" {
		f.StringVar(&cfg.cluster, "cluster", "", "filter endpoints by cluster name field")
		f.StringVar(&cfg.status, "status", "", "filter endpoints by status field (HEALTHY, UNHEALTHY, DRAINING...)")
	}
	return cmd
}

// runProxyConfig reads the pod's (or the file's) admin output and prints type use.
func runProxyConfig(ctx context.Context, g *globalFlags, cfg *pcConfig, use, pod string, format proxyconfig.Format, out, errOut io.Writer) error {
	cf := proxyconfig.ClusterFilter{FQDN: cfg.fqdn, Port: cfg.port, Subset: cfg.subset, Direction: proxyconfig.Direction(cfg.direction)}
	lf := proxyconfig.ListenerFilter{Address: cfg.address, Port: uint32(cfg.port), Type: proxyconfig.ListenerType(cfg.listenerType), Verbose: cfg.verbose}
	rf := proxyconfig.RouteFilter{Name: cfg.routeName, Verbose: cfg.verbose}
	ef := proxyconfig.EndpointFilter{Address: cfg.address, Port: uint32(cfg.port), Cluster: cfg.cluster, Status: cfg.status}
	for _, err := range []error{cf.Validate(), lf.Validate(), ef.Validate()} {
		if err != nil {
			return err
		}
	}
	path := "config_dump?include_eds"
	if use == "endpoint" {
		path = "clusters?format=json"
	}
	body, err := readAdmin(ctx, g, pod, cfg.namespace, cfg.file, path)
	if err != nil {
		return err
	}
	w := proxyconfig.Writer{Out: out}
	if use == "endpoint" {
		c, err := proxyconfig.ParseClusters(body)
		if err != nil {
			return fmt.Errorf("%s: %w", source(pod, cfg.file), err)
		}
		return w.Endpoints(c, ef, format)
	}
	d, err := proxyconfig.ParseConfigDump(body)
	if err != nil {
		return fmt.Errorf("%s: %w", source(pod, cfg.file), err)
	}
	switch use {
	case "all":
		return w.All(d, proxyconfig.AllFilter{Cluster: cf, Listener: lf, Route: rf, Endpoint: ef, WithHeaders: cfg.withHeaders}, format)
	case "bootstrap":
		return w.Bootstrap(d, format)
	case "cluster":
		return w.Clusters(d, cf, format)
	case "listener":
		return w.Listeners(d, lf, format)
	case "route":
		if err := w.Routes(d, rf, format); err != nil {
			return err
		}
		warnUnknownRoute(d, rf.Name, errOut)
		return nil
	case "secret":
		return w.Secrets(d, format)
	}
	return fmt.Errorf("unknown type %q", use)
}

// warnUnknownRoute tells on stderr (the table stays istioctl's: its header alone) that
// --name named no route, and that a lab is chosen with --lab: `--name LAB` put before
// proxy-config, as in the other verbs, lands here as the route filter.
func warnUnknownRoute(d *proxyconfig.ConfigDump, name string, errOut io.Writer) {
	if name == "" {
		return
	}
	names, err := proxyconfig.RouteNames(d)
	if err != nil || slices.Contains(names, name) {
		return
	}
	fmt.Fprintf(errOut, "meshlab: no route is named %q (routes: %s); here --name filters routes, as in istioctl: choose the lab with --lab\n",
		name, strings.Join(names, ", "))
}

func source(pod, file string) string {
	if file != "" {
		return file
	}
	return "the proxy of " + pod
}

// readAdmin returns file's content, or GET /<path> from pod's proxy admin API through
// the agent's socket (the admin listens inside the pod's namespace).
func readAdmin(ctx context.Context, g *globalFlags, pod, namespace, file, path string) ([]byte, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--file: %w", err)
		}
		return b, nil
	}
	paths, key, err := g.podPathsIn(pod, namespace, true)
	if err != nil {
		return nil, err
	}
	b, err := fetchAdmin(ctx, paths.AgentSocket(key), path)
	if err != nil {
		return nil, fmt.Errorf("read the config of %s's proxy: %w", pod, err)
	}
	return b, nil
}

// fetchAdmin GETs /admin/<path> from the agent listening on sock.
func fetchAdmin(ctx context.Context, sock, path string) ([]byte, error) {
	c := agentapi.NewClient(sock)
	defer c.Close()
	return c.AdminBytes(ctx, path)
}

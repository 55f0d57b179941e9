package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"
)

// proxyConfigTypes are the sections `meshlab proxy-config` shows, as istioctl names them.
var proxyConfigTypes = []string{"bootstrap", "clusters", "endpoints", "listeners", "routes", "secrets", "all"}

func newProxyConfigCmd(g *globalFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "proxy-config TYPE POD",
		Short: "Show a pod's proxy config as the proxy holds it (its admin /config_dump), like istioctl proxy-config",
		Long: `Reads the proxy's own /config_dump through the pod's agent: this is the proxy's truth,
not the control plane's intent. TYPE is one of ` + strings.Join(proxyConfigTypes, ", ") + `.`,
		Example: `  sudo meshlab proxy-config clusters frontend-v1
  sudo meshlab proxy-config routes frontend-v1 -o yaml`,
		Args: cobra.ExactArgs(2),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			switch len(args) {
			case 0:
				return proxyConfigTypes, cobra.ShellCompDirectiveNoFileComp
			case 1:
				return podNames(g, true), cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			typ, pod := args[0], args[1]
			if !slices.Contains(proxyConfigTypes, typ) {
				return fmt.Errorf("unknown type %q: choose one of %v", typ, proxyConfigTypes)
			}
			if output == "short" || output == "text" || output == "" {
				output = "short" // the table, istioctl's default
			} else if err := checkOutput(output); err != nil {
				return err
			}
			paths, err := g.podPaths(pod, true)
			if err != nil {
				return err
			}
			dump, err := fetchConfigDump(cmd.Context(), paths.AgentSocket(pod))
			if err != nil {
				return fmt.Errorf("read the config of %s's proxy: %w", pod, err)
			}
			return printProxyConfig(cmd.OutOrStdout(), dump, typ, output)
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// fetchConfigDump reads /config_dump?include_eds from the proxy's admin API through the
// agent's socket (the proxy's admin listens inside the pod's namespace).
func fetchConfigDump(ctx context.Context, sock string) (*adminv3.ConfigDump, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/admin/config_dump?include_eds", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /config_dump: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var dump adminv3.ConfigDump
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &dump); err != nil {
		return nil, fmt.Errorf("decode /config_dump: %w", err)
	}
	return &dump, nil
}

// printProxyConfig writes the section typ of dump to w: as JSON or YAML, or as a short
// table shaped like istioctl's.
func printProxyConfig(w io.Writer, dump *adminv3.ConfigDump, typ, output string) error {
	sections := map[string]proto.Message{}
	for _, a := range dump.GetConfigs() {
		m, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("decode %s: %w", a.GetTypeUrl(), err)
		}
		switch m.(type) {
		case *adminv3.BootstrapConfigDump:
			sections["bootstrap"] = m
		case *adminv3.ClustersConfigDump:
			sections["clusters"] = m
		case *adminv3.EndpointsConfigDump:
			sections["endpoints"] = m
		case *adminv3.ListenersConfigDump:
			sections["listeners"] = m
		case *adminv3.RoutesConfigDump:
			sections["routes"] = m
		case *adminv3.SecretsConfigDump:
			sections["secrets"] = m
		}
	}
	var msg proto.Message = dump
	if typ != "all" {
		msg = sections[typ]
		if msg == nil {
			return fmt.Errorf("the proxy's config dump has no %s section", typ)
		}
	}
	if output != "short" || typ == "bootstrap" || typ == "all" {
		js, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", UseProtoNames: true}.Marshal(msg)
		if err != nil {
			return err
		}
		if output == "yaml" {
			if js, err = yaml.JSONToYAML(js); err != nil {
				return err
			}
		}
		_, err = fmt.Fprintln(w, strings.TrimRight(string(js), "\n"))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var err error
	switch d := msg.(type) {
	case *adminv3.ClustersConfigDump:
		err = clusterTable(tw, d)
	case *adminv3.ListenersConfigDump:
		err = listenerTable(tw, d)
	case *adminv3.RoutesConfigDump:
		err = routeTable(tw, d)
	case *adminv3.EndpointsConfigDump:
		err = endpointTable(tw, d)
	case *adminv3.SecretsConfigDump:
		err = secretTable(tw, d)
	}
	if err != nil {
		return err
	}
	return tw.Flush()
}

func unpack[T proto.Message](a *anypb.Any, m T) (T, error) {
	return m, a.UnmarshalTo(m)
}

// clusterTable prints SERVICE FQDN, PORT, SUBSET, DIRECTION, TYPE as istioctl does,
// splitting Istio's "direction|port|subset|host" names.
func clusterTable(w io.Writer, d *adminv3.ClustersConfigDump) error {
	fmt.Fprintln(w, "SERVICE FQDN\tPORT\tSUBSET\tDIRECTION\tTYPE")
	var anys []*anypb.Any
	for _, c := range d.GetStaticClusters() {
		anys = append(anys, c.GetCluster())
	}
	for _, c := range d.GetDynamicActiveClusters() {
		anys = append(anys, c.GetCluster())
	}
	for _, a := range anys {
		c, err := unpack(a, &clusterv3.Cluster{})
		if err != nil {
			return err
		}
		fqdn, port, subset, dir := c.GetName(), "-", "-", "-"
		if parts := strings.Split(c.GetName(), "|"); len(parts) == 4 {
			dir, port, subset, fqdn = parts[0], parts[1], parts[2], parts[3]
			if subset == "" {
				subset = "-"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", fqdn, port, subset, dir, c.GetType())
	}
	return nil
}

// listenerTable prints each listener with its address and filter chains.
func listenerTable(w io.Writer, d *adminv3.ListenersConfigDump) error {
	fmt.Fprintln(w, "NAME\tADDRESS\tPORT\tBIND\tCHAINS")
	var anys []*anypb.Any
	for _, l := range d.GetStaticListeners() {
		anys = append(anys, l.GetListener())
	}
	for _, l := range d.GetDynamicListeners() {
		anys = append(anys, l.GetActiveState().GetListener())
	}
	for _, a := range anys {
		if a == nil {
			continue
		}
		l, err := unpack(a, &listenerv3.Listener{})
		if err != nil {
			return err
		}
		sa := l.GetAddress().GetSocketAddress()
		bind := "true"
		if l.GetBindToPort() != nil && !l.GetBindToPort().GetValue() {
			bind = "false"
		}
		var chains []string
		for _, fc := range l.GetFilterChains() {
			name := fc.GetName()
			if name == "" {
				name = "(unnamed)"
			}
			chains = append(chains, name)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", l.GetName(), sa.GetAddress(), sa.GetPortValue(), bind, strings.Join(chains, ","))
	}
	return nil
}

// routeTable prints every virtual host of every route configuration with its domains.
func routeTable(w io.Writer, d *adminv3.RoutesConfigDump) error {
	fmt.Fprintln(w, "NAME\tVHOST NAME\tDOMAINS\tROUTES")
	var anys []*anypb.Any
	for _, r := range d.GetStaticRouteConfigs() {
		anys = append(anys, r.GetRouteConfig())
	}
	for _, r := range d.GetDynamicRouteConfigs() {
		anys = append(anys, r.GetRouteConfig())
	}
	for _, a := range anys {
		rc, err := unpack(a, &routev3.RouteConfiguration{})
		if err != nil {
			return err
		}
		for _, vh := range rc.GetVirtualHosts() {
			domains := vh.GetDomains()
			shown := strings.Join(domains, ", ")
			if len(domains) > 3 {
				shown = strings.Join(domains[:3], ", ") + fmt.Sprintf(" + %d more", len(domains)-3)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", rc.GetName(), vh.GetName(), shown, len(vh.GetRoutes()))
		}
	}
	return nil
}

// endpointTable prints ENDPOINT, STATUS, CLUSTER as istioctl does.
func endpointTable(w io.Writer, d *adminv3.EndpointsConfigDump) error {
	fmt.Fprintln(w, "ENDPOINT\tSTATUS\tCLUSTER")
	var anys []*anypb.Any
	for _, e := range d.GetStaticEndpointConfigs() {
		anys = append(anys, e.GetEndpointConfig())
	}
	for _, e := range d.GetDynamicEndpointConfigs() {
		anys = append(anys, e.GetEndpointConfig())
	}
	for _, a := range anys {
		la, err := unpack(a, &endpointv3.ClusterLoadAssignment{})
		if err != nil {
			return err
		}
		for _, le := range la.GetEndpoints() {
			for _, ep := range le.GetLbEndpoints() {
				addr := ep.GetEndpoint().GetAddress()
				where := addr.GetPipe().GetPath()
				if sa := addr.GetSocketAddress(); sa != nil {
					where = net.JoinHostPort(sa.GetAddress(), fmt.Sprint(sa.GetPortValue()))
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", where, ep.GetHealthStatus(), la.GetClusterName())
			}
		}
	}
	return nil
}

// secretTable prints the secrets the proxy holds.
func secretTable(w io.Writer, d *adminv3.SecretsConfigDump) error {
	fmt.Fprintln(w, "RESOURCE NAME\tSTATE\tVERSION")
	for _, s := range d.GetStaticSecrets() {
		fmt.Fprintf(w, "%s\tstatic\t-\n", s.GetName())
	}
	for _, s := range d.GetDynamicActiveSecrets() {
		fmt.Fprintf(w, "%s\tactive\t%s\n", s.GetName(), s.GetVersionInfo())
	}
	for _, s := range d.GetDynamicWarmingSecrets() {
		fmt.Fprintf(w, "%s\twarming\t%s\n", s.GetName(), s.GetVersionInfo())
	}
	return nil
}

package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// newDescribeCmd returns `meshlab describe pod|service NAME`.
func newDescribeCmd(g *globalFlags) *cobra.Command {
	var output, namespace, kubeNamespace string
	cmd := &cobra.Command{
		Use:   "describe (pod|service NAME | KIND NAME | KIND/NAME)",
		Short: "Show one object of the running lab in detail",
		Long: "Show one object of the running lab in detail: a pod or service as the lab runs it, or an object the lab\n" +
			"stores as written (clusterrole, clusterrolebinding, role, rolebinding, pdb, hpa) as kubectl describe prints it.",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return describeKube(cmd, g, kubeNamespace, args)
		},
	}
	cmd.Flags().StringVarP(&kubeNamespace, "namespace", "n", "", "the object's namespace (default: default)")
	podCmd := &cobra.Command{
		Use:               "pod NAME",
		Short:             "Show a pod: its address, readiness, and its sidecar's epochs, restarts and last failure",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePods(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			_, key, err := g.podPathsIn(args[0], namespace, false)
			if err != nil {
				return err
			}
			args[0] = key // the pod's key names it to the lab even where its name repeats
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			d, err := c.PodDetail(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printOutput(cmd.OutOrStdout(), output, d, func(w io.Writer) error { return printPodDetail(w, d, time.Now()) })
		},
	}
	addOutputFlag(podCmd, &output)
	podCmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the pod's namespace (needed only when its name is in several; NAME.NAMESPACE also works)")
	cmd.AddCommand(podCmd, newDescribeServiceCmd(g))
	return cmd
}

// printPodDetail writes d as `meshlab describe pod` shows it; now dates the ages.
func printPodDetail(w io.Writer, d api.PodDetail, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Name:\t%s\n", d.Name)
	fmt.Fprintf(tw, "Namespace:\t%s\n", d.Namespace)
	fmt.Fprintf(tw, "Network namespace:\t%s\n", d.NetNS)
	fmt.Fprintf(tw, "IP:\t%s\n", d.IP)
	if d.ServiceAccount != "" {
		fmt.Fprintf(tw, "Service account:\t%s\n", d.ServiceAccount)
	}
	if len(d.Labels) > 0 {
		keys := make([]string, 0, len(d.Labels))
		for k := range d.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, k+"="+d.Labels[k])
		}
		fmt.Fprintf(tw, "Labels:\t%s\n", strings.Join(kv, ","))
	}
	fmt.Fprintf(tw, "Ready:\t%t\n", d.Ready)
	if d.DataplaneMode != "" {
		fmt.Fprintf(tw, "Data-plane mode:\t%s\n", d.DataplaneMode)
	}
	if d.Ambient != nil {
		return printAmbient(w, tw, d.Ambient)
	}
	if z := d.Ztunnel; z != nil {
		fmt.Fprintf(tw, "Ztunnel:\tthe lab's node proxy (istio-system/ztunnel DaemonSet's pod, service account ztunnel)\n")
		fmt.Fprintf(tw, "  ZDS:\t%s\n", map[bool]string{true: "connected to the node agent", false: "not connected to the node agent"}[z.Connected])
		fmt.Fprintf(tw, "  Ambient pods:\t%d\n", z.Pods)
		fmt.Fprintf(tw, "  Restarts:\t%d\n", z.Restarts)
		fmt.Fprintf(tw, "  Log:\t%s (meshlab logs %s -n %s)\n", z.Log, d.Name, d.Namespace)
		fmt.Fprintf(tw, "  Admin:\t127.0.0.1:15000 in %s (meshlab ztunnel-config all)\n", d.NetNS)
		return tw.Flush()
	}
	if !d.Sidecar {
		fmt.Fprintf(tw, "Sidecar:\tnone\n")
		return tw.Flush()
	}
	p := d.Proxy
	if p == nil {
		fmt.Fprintf(tw, "Sidecar:\tagent not reachable\n")
		if d.Message != "" {
			fmt.Fprintf(tw, "Message:\t%s\n", d.Message)
		}
		return tw.Flush()
	}
	if p.Proxyless != nil {
		return printProxyless(w, tw, d, now)
	}
	state := "running"
	if p.Failed {
		state = "FAILED (not restarted any more; meshlab proxy restart " + d.Name + " tries again)"
	}
	fmt.Fprintf(tw, "Sidecar:\t%s\n", state)
	fmt.Fprintf(tw, "  Data plane:\t%s\n", p.DataPlane)
	fmt.Fprintf(tw, "  Binary:\t%s\n", p.ProxyPath)
	fmt.Fprintf(tw, "  Version:\t%s\n", p.ProxyVersion)
	s := p.Settings
	fmt.Fprintf(tw, "  Settings:\tlog level %s, concurrency %d, drain %s, parent shutdown %s\n",
		s.LogLevel, s.Concurrency, s.DrainDuration, s.ParentShutdownDuration)
	fmt.Fprintf(tw, "  Restarts:\t%d (failures in a row: %d)\n", p.Restarts, p.ConsecutiveFailures)
	if p.NextRestartAt != nil {
		fmt.Fprintf(tw, "  Next restart:\tin %s (backing off)\n", p.NextRestartAt.Sub(now).Round(time.Millisecond))
	}
	printCert(tw, d.Name, p.Cert, now)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nEpochs:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  EPOCH\tPID\tSTATE\tREASON\tSTARTED\tEXITED\tEXIT CODE\tVERSION\tERROR")
	for _, e := range p.Epochs {
		exited, code := "-", "-"
		if e.ExitedAt != nil {
			exited = ago(now, *e.ExitedAt)
		}
		if e.ExitCode != nil {
			code = fmt.Sprint(*e.ExitCode)
		}
		fmt.Fprintf(tw, "  %d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Epoch, e.PID, e.State, e.Reason,
			ago(now, e.StartedAt), exited, code, e.ProxyVersion, firstLine(e.Error))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.Message != "" {
		fmt.Fprintln(w, "\nMessage:")
		for _, line := range strings.Split(p.Message, "\n") {
			fmt.Fprintln(w, "  "+line)
		}
	}
	return nil
}

// printProxyless writes a proxyless gRPC pod's agent: no proxy or epochs, the files its
// app reads and the XDS proxy relaying the app's streams.
func printProxyless(w io.Writer, tw *tabwriter.Writer, d api.PodDetail, now time.Time) error {
	p, pl := d.Proxy, d.Proxy.Proxyless
	fmt.Fprintf(tw, "Sidecar:\tnone: proxyless gRPC (grpc-agent template); the agent runs no proxy\n")
	fmt.Fprintf(tw, "  Bootstrap:\t%s (GRPC_XDS_BOOTSTRAP)\n", pl.Bootstrap)
	fmt.Fprintf(tw, "  Certificates:\t%s\n", pl.CertDir)
	fmt.Fprintf(tw, "  XDS proxy:\tunix://%s, relayed to the lab: %d streams open, %d since start\n", pl.XDSSocket, len(pl.Streams), pl.Relayed)
	for _, s := range pl.Streams {
		fmt.Fprintf(tw, "    stream:\t%s\n", s)
	}
	if pl.LastError != "" {
		fmt.Fprintf(tw, "  Last stream error:\t%s (%s)\n", pl.LastError, ago(now, pl.LastErrorAt))
	}
	printCert(tw, d.Name, p.Cert, now)
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.Message != "" {
		fmt.Fprintln(w, "\nMessage:")
		for _, line := range strings.Split(p.Message, "\n") {
			fmt.Fprintln(w, "  "+line)
		}
	}
	return nil
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Round(time.Millisecond).String() + " ago"
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// printAmbient writes an ambient pod's enrollment and its in-pod rules with counters.
func printAmbient(w io.Writer, tw *tabwriter.Writer, a *api.AmbientStatus) error {
	redirection := a.Redirection
	switch redirection {
	case "":
		redirection = "none (not enrolled)"
	case "pending":
		redirection = "pending (in-pod rules installed; ztunnel has not acknowledged the pod)"
	}
	fmt.Fprintf(tw, "Sidecar:\tnone (ambient: its traffic goes through ztunnel)\n")
	fmt.Fprintf(tw, "Redirection:\t%s (ambient.istio.io/redirection)\n", redirection)
	if err := tw.Flush(); err != nil {
		return err
	}
	if a.Error != "" {
		fmt.Fprintf(w, "\nIn-pod rules: %s\n", a.Error)
	}
	if a.Rules != "" {
		fmt.Fprintln(w, "\nIn-pod rules (istio-cni's, [packets:bytes]):")
		for _, line := range strings.Split(strings.TrimSpace(a.Rules), "\n") {
			fmt.Fprintln(w, "  "+line)
		}
	}
	if a.Routing != "" {
		fmt.Fprintln(w, "\nIn-pod routing:")
		for _, line := range strings.Split(strings.TrimSpace(a.Routing), "\n") {
			fmt.Fprintln(w, "  "+line)
		}
	}
	return nil
}

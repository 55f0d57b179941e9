package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/api"
)

// `meshlab waypoint`, istioctl's waypoint verb against a running lab: generate, apply,
// list, delete and status with istioctl's flags and words. A waypoint is a Gateway of class
// istio-waypoint with the HBONE listener {mesh, 15008}; the lab makes its Service and pod
// as Istio's deployment controller does and writes its status (lab/waypoint).

// Names istioctl's waypoint verb uses (Istio's constants and labels).
const (
	waypointClass          = "istio-waypoint"
	waypointDefaultName    = "waypoint"
	labelWaypointFor       = "istio.io/waypoint-for"
	labelUseWaypoint       = "istio.io/use-waypoint"
	labelDataplaneMode     = "istio.io/dataplane-mode"
	labelRev               = "istio.io/rev"
	waypointDefaultTimeout = 90 * time.Second
)

// waypointTrafficTypes are istio.io/waypoint-for's values, sorted as istioctl prints them.
var waypointTrafficTypes = []string{"all", "none", "service", "workload"}

// waypointFlags are istioctl waypoint's flags.
type waypointFlags struct {
	name, namespace, trafficType, revision string
	enroll, overwrite, wait, statusWait    bool
	deleteAll, allNamespaces               bool
	timeout                                time.Duration
	// poll is how often apply --wait and status look at the Gateway (istioctl: 1s).
	poll time.Duration
}

// scope is the namespace list and status read: -n (default "default"), or every
// namespace ("") with -A.
func (f *waypointFlags) scope() string {
	if f.allNamespaces {
		return ""
	}
	return cmp.Or(f.namespace, "default")
}

func newWaypointCmd(g *globalFlags) *cobra.Command {
	f := &waypointFlags{poll: time.Second}
	cmd := &cobra.Command{
		Use:   "waypoint",
		Short: "Manage waypoint configuration",
		Long:  "A group of commands used to manage waypoint configuration, as istioctl waypoint (a waypoint is a Gateway of class istio-waypoint)",
		Example: `  # Apply a waypoint to the current namespace
  meshlab waypoint apply

  # Generate a waypoint as yaml
  meshlab waypoint generate --namespace default

  # List all waypoints in a specific namespace
  meshlab waypoint list --namespace default`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 0 {
				return fmt.Errorf("unknown subcommand %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.HelpFunc()(cmd, args)
			return nil
		},
	}
	cmd.PersistentFlags().StringVar(&f.name, "name", waypointDefaultName, "name of the waypoint")
	cmd.PersistentFlags().StringVarP(&f.namespace, "namespace", "n", "", "the namespace (default: default)")
	// withClient runs do with a client of the lab's API, closed after.
	withClient := func(do func(*api.Client) error) error {
		c, err := g.apiClient()
		if err != nil {
			return err
		}
		defer c.Close()
		return do(c)
	}

	generate := &cobra.Command{
		Use:     "generate",
		Short:   "Generate a waypoint configuration",
		Long:    "Generate a waypoint configuration as YAML",
		Example: "  # Generate a waypoint as yaml\n  meshlab waypoint generate --namespace default",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gw, err := makeWaypoint(f, f.namespace)
			if err != nil {
				return fmt.Errorf("failed to create gateway: %w", err)
			}
			s, err := waypointYAML(gw)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), s)
			return nil
		},
	}
	generate.Flags().StringVar(&f.trafficType, "for", "", fmt.Sprintf("Specify the traffic type %v for the waypoint", waypointTrafficTypes))
	generate.Flags().StringVarP(&f.revision, "revision", "r", "", "The revision to label the waypoint with")

	apply := &cobra.Command{
		Use:   "apply",
		Short: "Apply a waypoint configuration",
		Long:  "Apply a waypoint configuration to the lab",
		Example: `  # Apply a waypoint to the current namespace
  meshlab waypoint apply

  # Apply a waypoint to a specific namespace and wait for it to be ready
  meshlab waypoint apply --namespace default --wait

  # Apply the namespace's waypoint and make the namespace use it (Istio's ambient Getting Started)
  meshlab waypoint apply --enroll-namespace --wait`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(func(c *api.Client) error { return runWaypointApply(cmd.Context(), c, f, cmd.OutOrStdout()) })
		},
	}
	apply.Flags().StringVar(&f.trafficType, "for", "", fmt.Sprintf("Specify the traffic type %v for the waypoint", waypointTrafficTypes))
	apply.Flags().BoolVar(&f.enroll, "enroll-namespace", false, "If set, the namespace will be labeled with the waypoint name")
	apply.Flags().BoolVar(&f.overwrite, "overwrite", false, "Overwrite the existing Waypoint used by the namespace")
	apply.Flags().StringVarP(&f.revision, "revision", "r", "", "The revision to label the waypoint with")
	apply.Flags().BoolVarP(&f.wait, "wait", "w", false, "Wait for the waypoint to be ready")
	apply.Flags().DurationVar(&f.timeout, "waypoint-timeout", waypointDefaultTimeout, "Timeout for waiting for waypoint ready")

	list := &cobra.Command{
		Use:   "list",
		Short: "List managed waypoint configurations",
		Long:  "List managed waypoint configurations in the lab",
		Example: `  # List all waypoints in a specific namespace
  meshlab waypoint list --namespace default

  # List all waypoints in the lab
  meshlab waypoint list -A`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(func(c *api.Client) error {
				gws, err := labGateways(cmd.Context(), c, f.scope(), "")
				if err != nil {
					return err
				}
				return printWaypointList(cmd.OutOrStdout(), gws, f.allNamespaces)
			})
		},
	}
	list.Flags().BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "List all waypoints in all namespaces")

	del := &cobra.Command{
		Use:   "delete",
		Short: "Delete a waypoint configuration",
		Long:  "Delete a waypoint configuration from the lab",
		Example: `  # Delete a waypoint by name, which can obtain from meshlab waypoint list
  meshlab waypoint delete waypoint-name --namespace default

  # Delete several waypoints by name
  meshlab waypoint delete waypoint-name1 waypoint-name2 --namespace default

  # Delete all waypoints in a specific namespace
  meshlab waypoint delete --all --namespace default`,
		Args: func(_ *cobra.Command, args []string) error {
			if (f.deleteAll || f.revision != "") && len(args) > 0 {
				return errors.New("cannot specify waypoint names when deleting all waypoints")
			}
			if !f.deleteAll && f.revision == "" && len(args) == 0 {
				return errors.New("must specify a waypoint name or delete all using --all or delete specific revision using --revision")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(func(c *api.Client) error {
				return runWaypointDelete(cmd.Context(), c, cmp.Or(f.namespace, "default"), args, f.revision, cmd.OutOrStdout())
			})
		},
	}
	del.Flags().BoolVar(&f.deleteAll, "all", false, "Delete all waypoints in the namespace")
	del.Flags().StringVarP(&f.revision, "revision", "r", "", "Delete the specified version of the waypoint in the namespace")

	status := &cobra.Command{
		Use:   "status",
		Short: "Show the status of waypoints",
		Long:  "Show the status of waypoints in the lab",
		Example: `  # Show the status of the waypoint in the default namespace
  meshlab waypoint status

  # Show the status of the waypoint in a specific namespace
  meshlab waypoint status --namespace default

  # Show the status of the waypoint in all namespaces
  meshlab waypoint status --all-namespaces`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 0 {
				return fmt.Errorf("unknown subcommand %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(func(c *api.Client) error { return runWaypointStatus(cmd.Context(), c, f, f.scope(), cmd.OutOrStdout()) })
		},
	}
	status.Flags().BoolVarP(&f.statusWait, "wait", "w", true, "Wait for the waypoint to be ready")
	status.Flags().DurationVar(&f.timeout, "waypoint-timeout", waypointDefaultTimeout, "Timeout for retrieving status for waypoint")
	status.Flags().BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "Show the status of waypoints in all namespaces")

	cmd.AddCommand(generate, del, list, apply, status)
	return cmd
}

// makeWaypoint returns the Gateway istioctl makes for the flags: --name (waypoint; "none"
// is reserved), class istio-waypoint, the HBONE listener {mesh, 15008}, labelled
// istio.io/waypoint-for only when --for is given (else istiod's default, service, or the
// GatewayClass's applies) and istio.io/rev with --revision.
func makeWaypoint(f *waypointFlags, namespace string) (*gwv1.Gateway, error) {
	name := f.name
	switch name {
	case "":
		name = waypointDefaultName
	case "none":
		return nil, errors.New("invalid name provided for waypoint, 'none' is a reserved value")
	}
	gw := &gwv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: waypointClass,
			Listeners:        []gwv1.Listener{{Name: "mesh", Port: 15008, Protocol: "HBONE"}},
		},
	}
	if f.trafficType != "" {
		if !slices.Contains(waypointTrafficTypes, f.trafficType) {
			return nil, fmt.Errorf("invalid traffic type: %s. Valid options are: %v", f.trafficType, waypointTrafficTypes)
		}
		gw.Labels = map[string]string{labelWaypointFor: f.trafficType}
	}
	if f.revision != "" {
		if gw.Labels == nil {
			gw.Labels = map[string]string{}
		}
		gw.Labels[labelRev] = f.revision
	}
	return gw, nil
}

// waypointYAML renders a Gateway as istioctl waypoint generate prints it (without the
// null creationTimestamp and the empty status).
func waypointYAML(gw *gwv1.Gateway) (string, error) {
	b, err := yaml.Marshal(gw)
	if err != nil {
		return "", fmt.Errorf("render the waypoint: %w", err)
	}
	s := strings.ReplaceAll(string(b), "  creationTimestamp: null\n", "")
	return strings.ReplaceAll(s, "status: {}\n", ""), nil
}

// labGateways returns the lab's Gateway API Gateways of namespace ns ("" for all), or
// the one named, with their status, as the lab's kubectl view renders them.
func labGateways(ctx context.Context, c *api.Client, ns, name string) ([]gwv1.Gateway, error) {
	objs, err := c.KubeObjects(ctx, api.GatewayAPIGatewayKind, ns, name, "")
	if err != nil {
		return nil, err
	}
	out := make([]gwv1.Gateway, 0, len(objs))
	for _, o := range objs {
		var gw gwv1.Gateway
		if err := json.Unmarshal(o.Object, &gw); err != nil {
			return nil, fmt.Errorf("read Gateway %s/%s: %w", o.Namespace, o.Name, err)
		}
		out = append(out, gw)
	}
	slices.SortFunc(out, func(a, b gwv1.Gateway) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// waypoints keeps the Gateways of class istio-waypoint.
func waypoints(gws []gwv1.Gateway) []gwv1.Gateway {
	var out []gwv1.Gateway
	for _, gw := range gws {
		if gw.Spec.GatewayClassName == waypointClass {
			out = append(out, gw)
		}
	}
	return out
}

// programmed returns the Gateway's Programmed condition, and whether it is True.
func programmed(gw gwv1.Gateway) (metav1.Condition, bool) {
	for _, c := range gw.Status.Conditions {
		if c.Type == string(gwv1.GatewayConditionProgrammed) {
			return c, c.Status == metav1.ConditionTrue
		}
	}
	return metav1.Condition{}, false
}

// namespaceLabels returns the labels of namespace ns as the lab has them (an undeclared
// namespace that exists has none), or istioctl's error for one that does not exist.
func namespaceLabels(ctx context.Context, c *api.Client, ns string) (map[string]string, error) {
	lookup, err := kindResolver(ctx, c)
	if err != nil {
		return nil, err
	}
	k, err := lookup("namespace")
	if err != nil {
		return nil, err
	}
	o, err := readMetaObject(ctx, c, "", metaTarget{kind: k, name: ns})
	if err != nil {
		return nil, fmt.Errorf("namespace: %s not found", ns)
	}
	return o.values("labels"), nil
}

// runWaypointApply is istioctl waypoint apply: with --enroll-namespace it warns (and
// stops) when the namespace already uses a waypoint and --overwrite is not given, and
// warns when the namespace is not in ambient mode; it applies the Gateway, waits with
// --wait for Programmed, then labels the namespace istio.io/use-waypoint=<name>.
func runWaypointApply(ctx context.Context, c *api.Client, f *waypointFlags, out io.Writer) error {
	ns := cmp.Or(f.namespace, "default")
	labels, err := namespaceLabels(ctx, c, ns)
	if err != nil {
		return err
	}
	if f.enroll {
		if !f.overwrite && labels[labelUseWaypoint] != "" {
			fmt.Fprintf(out, "⚠️ Warning: namespace (%s) already has an enrolled Waypoint. Consider adding the `--overwrite` flag to your apply command.\n", ns)
			return nil
		}
		if labels[labelDataplaneMode] != "ambient" {
			fmt.Fprintf(out, "⚠️ Warning: namespace is not enrolled in ambient. Consider running\t`meshlab label namespace %s istio.io/dataplane-mode=ambient`\n", ns)
		}
	}
	gw, err := makeWaypoint(f, ns)
	if err != nil {
		return fmt.Errorf("failed to create gateway: %w", err)
	}
	data, err := waypointYAML(gw)
	if err != nil {
		return err
	}
	if _, err := c.Apply(ctx, []api.ConfigFile{{Name: "<waypoint " + ns + "/" + gw.Name + ">", Data: data, Namespace: ns}}); err != nil {
		return err
	}
	fmt.Fprintf(out, "✅ waypoint %s/%s applied\n", gw.Namespace, gw.Name)
	if f.wait {
		if err := waitProgrammed(ctx, c, ns, gw.Name, f.timeout, f.poll); err != nil {
			return err
		}
		fmt.Fprintf(out, "✅ waypoint %s/%s is ready!\n", gw.Namespace, gw.Name)
	}
	if f.enroll {
		lookup, err := kindResolver(ctx, c)
		if err != nil {
			return err
		}
		k, err := lookup("namespace")
		if err != nil {
			return err
		}
		o, err := readMetaObject(ctx, c, "", metaTarget{kind: k, name: ns})
		if err != nil {
			return fmt.Errorf("failed to label namespace with waypoint: %w", err)
		}
		next := o.values("labels")
		next[labelUseWaypoint] = gw.Name
		o.setValues("labels", next)
		body, err := json.Marshal(o.obj)
		if err != nil {
			return fmt.Errorf("failed to label namespace with waypoint: %w", err)
		}
		if _, err := c.Apply(ctx, []api.ConfigFile{{Name: o.file, Data: string(body)}}); err != nil {
			return fmt.Errorf("failed to label namespace with waypoint: %w", err)
		}
		fmt.Fprintf(out, "✅ namespace %s labeled with \"%s: %s\"\n", ns, labelUseWaypoint, gw.Name)
	}
	return nil
}

// waitProgrammed polls the Gateway every poll until it is Programmed, as istioctl's
// --wait, failing after timeout with istioctl's words.
func waitProgrammed(ctx context.Context, c *api.Client, ns, name string, timeout, poll time.Duration) error {
	start := time.Now()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		gws, err := labGateways(ctx, c, ns, name)
		if err == nil && len(gws) == 1 {
			if _, ok := programmed(gws[0]); ok {
				return nil
			}
		}
		if time.Since(start) > timeout {
			msg := fmt.Sprintf("timed out while waiting for waypoint\t%s/%s", ns, name)
			if err != nil {
				msg += ": " + err.Error()
			}
			return errors.New(msg)
		}
	}
}

// printWaypointList prints istioctl waypoint list's table: NAME, REVISION (default when
// unlabelled), TRAFFIC TYPE (the istio.io/waypoint-for label, "none" when unlabelled, as
// istioctl prints it) and PROGRAMMED, with NAMESPACE first for -A. No Gateway at all is
// "No waypoints found."
func printWaypointList(out io.Writer, gws []gwv1.Gateway, allNamespaces bool) error {
	if len(gws) == 0 {
		fmt.Fprintln(out, "No waypoints found.")
		return nil
	}
	w := new(tabwriter.Writer).Init(out, 0, 8, 5, ' ', 0)
	if allNamespaces {
		fmt.Fprintln(w, "NAMESPACE\tNAME\tREVISION\tTRAFFIC TYPE\tPROGRAMMED")
	} else {
		fmt.Fprintln(w, "NAME\tREVISION\tTRAFFIC TYPE\tPROGRAMMED")
	}
	for _, gw := range waypoints(gws) {
		rev := cmp.Or(gw.Labels[labelRev], "default")
		traffic := cmp.Or(gw.Labels[labelWaypointFor], "none")
		prog := "False"
		if c, _ := programmed(gw); c.Type != "" {
			prog = string(c.Status)
		}
		if allNamespaces {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", gw.Namespace, gw.Name, rev, traffic, prog)
		} else {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", gw.Name, rev, traffic, prog)
		}
	}
	return w.Flush()
}

// runWaypointDelete is istioctl waypoint delete: the waypoints named (a name that is not a
// waypoint of the namespace is reported not found), or with no names every waypoint of
// the namespace (of --revision's revision when given).
func runWaypointDelete(ctx context.Context, c *api.Client, ns string, names []string, revision string, out io.Writer) error {
	gws, err := labGateways(ctx, c, ns, "")
	if err != nil {
		return err
	}
	wps := waypoints(gws)
	var del []string
	if len(names) == 0 {
		for _, gw := range wps {
			if revision == "" || gw.Labels[labelRev] == revision {
				del = append(del, gw.Name)
			}
		}
	} else {
		for _, n := range names {
			if slices.ContainsFunc(wps, func(gw gwv1.Gateway) bool { return gw.Name == n }) {
				del = append(del, n)
			} else {
				fmt.Fprintf(out, "waypoint %s/%s not found\n", ns, n)
			}
		}
	}
	var errs []error
	for _, n := range del {
		_, err := c.Delete(ctx, api.DeleteRequest{Refs: []api.ObjectRef{{Kind: api.GatewayAPIGatewayKind, Namespace: ns, Name: n}}})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(out, "waypoint %s/%s deleted\n", ns, n)
	}
	return errors.Join(errs...)
}

// runWaypointStatus is istioctl waypoint status: per waypoint of ns ("" for all), a row of
// its Programmed condition (STATUS, TYPE, REASON, MESSAGE) every poll until it is
// Programmed (once without --wait), failing after --waypoint-timeout.
func runWaypointStatus(ctx context.Context, c *api.Client, f *waypointFlags, ns string, out io.Writer) error {
	gws, err := labGateways(ctx, c, ns, "")
	if err != nil {
		return err
	}
	if len(gws) == 0 {
		fmt.Fprintln(out, "No waypoints found.")
		return nil
	}
	w := new(tabwriter.Writer).Init(out, 0, 8, 5, ' ', 0)
	if ns == "" {
		fmt.Fprintln(w, "NAMESPACE\tNAME\tSTATUS\tTYPE\tREASON\tMESSAGE")
	} else {
		fmt.Fprintln(w, "NAME\tSTATUS\tTYPE\tREASON\tMESSAGE")
	}
	start := time.Now()
	t := time.NewTicker(f.poll)
	defer t.Stop()
	for _, gw := range waypoints(gws) {
		last := ""
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
			cur := gw
			got, err := labGateways(ctx, c, gw.Namespace, gw.Name)
			if err == nil && len(got) == 1 {
				cur = got[0]
			}
			cond, ok := programmed(cur)
			row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\n", cur.Name, cond.Status, cond.Type, cond.Reason, cond.Message)
			if ns == "" {
				row = cur.Namespace + "\t" + row
			}
			// A waypoint's row is printed once, then again only when its condition
			// changes (istioctl repeats it every second while it waits).
			if row != last {
				fmt.Fprint(w, row)
				last = row
			}
			if !f.statusWait || ok {
				break
			}
			if time.Since(start) > f.timeout {
				_ = w.Flush()
				return fmt.Errorf("timed out while retrieving status for waypoint\t%s/%s", cur.Namespace, cur.Name)
			}
		}
	}
	return w.Flush()
}

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/kubeedit"
)

// newRolloutCmd is kubectl rollout, with the status form Istio's pages run after
// applying an addon or a Deployment (`kubectl rollout status deployment/prometheus -n
// istio-system`) and the restart form (`kubectl rollout restart deployment -n
// istio-system istiod`, the trust domain migration page's).
func newRolloutCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout (status|restart)",
		Short: "Watch or restart a Deployment's rollout, as kubectl rollout",
	}
	cmd.AddCommand(newRolloutStatusCmd(g), newRolloutRestartCmd(g))
	return cmd
}

// restartedAtAnnotation is the pod template annotation kubectl rollout restart sets to
// the time: the changed template makes the Deployment roll its pods out afresh.
const restartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// newRolloutRestartCmd is kubectl rollout restart for Deployments. As kubectl, it patches
// each Deployment's pod template with restartedAtAnnotation, which the lab applies as any
// change of the template: new pods (new pod-template-hash, new names) replace the old
// ones. istio-system's istiod is the lab's control plane, held in the lab process rather
// than a Deployment of its own: restarting it is the lab's control plane restart
// (api.Client.RestartControlPlane).
func newRolloutRestartCmd(g *globalFlags) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "restart (deployment/NAME... | deployment NAME...)",
		Short: "Restart Deployments' pods (or istiod, the lab's control plane), as kubectl rollout restart",
		Example: `  meshlab rollout restart deployment -n istio-system istiod
  meshlab rollout restart deployment/httpbin`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			return runRolloutRestart(cmd.Context(), c, cmp.Or(namespace, "default"), args, time.Now(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the Deployments' namespace (default: default)")
	return cmd
}

// runRolloutRestart restarts the Deployments args name (kubectl's TYPE NAME... or
// TYPE/NAME...) in namespace at now, and prints kubectl's line for each.
func runRolloutRestart(ctx context.Context, c *api.Client, namespace string, args []string, now time.Time, out io.Writer) error {
	lookup, err := kindResolver(ctx, c)
	if err != nil {
		return err
	}
	if len(args) == 1 && !strings.Contains(args[0], "/") {
		return fmt.Errorf("rollout restart %s: name the Deployments (meshlab does not restart every Deployment of a namespace at once)", args[0])
	}
	targets, err := resolveMetaTargets(lookup, args)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{restartedAtAnnotation: now.Format(time.RFC3339)},
	}}}})
	if err != nil {
		return err
	}
	var files []api.ConfigFile
	var lines []string
	var errs []error
	restartCP := false
	for _, t := range targets {
		if t.kind.Kind != "Deployment" {
			return fmt.Errorf("error: %s %q restarting is not supported (meshlab restarts Deployments)", t.kind.Resource(true), t.name) //nolint:staticcheck // kubectl's text
		}
		ref := t.kind.Resource(false) + "/" + t.name
		if namespace == istiodNamespace && t.name == istiodName {
			restartCP = true
			lines = append(lines, ref+" restarted")
			continue
		}
		o, err := readStoredObject(ctx, c, namespace, t)
		if err != nil {
			return err
		}
		original, err := o.json()
		if err != nil {
			return err
		}
		patched, changed, err := kubeedit.Apply(original, patch, kubeedit.Strategic)
		if err != nil {
			return err
		}
		if !changed {
			// restartedAt has kubectl's one-second resolution: a second restart within
			// the same second changes nothing, and kubectl says so rather than print
			// "restarted" for pods that stay.
			errs = append(errs, fmt.Errorf("error: failed to create patch for %s: if restart has already been triggered within the past second, please wait before attempting to trigger another", t.name)) //nolint:staticcheck // kubectl's text
			continue
		}
		files = append(files, o.asFile(patched))
		lines = append(lines, o.ref()+" restarted")
	}
	if len(files) > 0 {
		if _, err := c.Apply(ctx, files); err != nil {
			return err
		}
	}
	if restartCP {
		if _, err := c.RestartControlPlane(ctx); err != nil {
			return err
		}
	}
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	return errors.Join(errs...)
}

// istiod's Deployment, as istioctl installs it: the lab's control plane.
const (
	istiodNamespace = "istio-system"
	istiodName      = "istiod"
)

// newRolloutStatusCmd is kubectl rollout status for Deployments: it waits until the
// Deployment's pods are available (its Available condition, as `wait
// --for=condition=available` reads it) and prints kubectl's line.
func newRolloutStatusCmd(g *globalFlags) *cobra.Command {
	var namespace string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status (deployment/NAME | deployment NAME)",
		Short: "Wait until a Deployment's pods are available, as kubectl rollout status",
		Example: `  meshlab rollout status deployment/prometheus -n istio-system
  meshlab rollout status deploy httpbin --timeout=60s`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, slash := strings.Cut(args[0], "/")
			switch {
			case slash && len(args) == 2, !slash && len(args) != 2:
				return fmt.Errorf("error: rollout status takes deployment/NAME or deployment NAME") //nolint:staticcheck // kubectl's text
			case !slash:
				name = args[1]
			}
			c, kinds, err := g.kindsClient(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			k, ok := kinds.Lookup(kind)
			if !ok || k.Kind != "Deployment" {
				return fmt.Errorf("error: rollout status: meshlab watches Deployments' rollouts, not %s (wait --for=condition=ready pod -l ... waits on pods)", kind) //nolint:staticcheck // kubectl's prefix
			}
			if namespace == "" {
				namespace = "default"
			}
			if timeout == 0 {
				timeout = -1 // kubectl's 0: no limit
			}
			cfg := &waitConfig{namespace: namespace, timeout: timeout, interval: 250 * time.Millisecond}
			cond, err := parseWaitFor("condition=available")
			if err != nil {
				return err
			}
			if err := runWait(cmd.Context(), c.KubeObjects, kinds, cfg, cond, []waitTarget{{kind: "Deployment", name: name}}, io.Discard); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deployment %q successfully rolled out\n", name)
			return nil
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the Deployment's namespace (default: default)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long to wait (0: until it is done), as kubectl's")
	return cmd
}

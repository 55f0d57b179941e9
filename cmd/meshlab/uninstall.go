package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// uninstalledObjects are the objects of an Istio install istioctl uninstall --purge
// reports removing, by group/version, kind, name and namespace, in the order it prunes
// them (namespaced kinds, then cluster-wide ones).
var uninstalledObjects = []struct{ gv, kind, name, namespace string }{
	{"autoscaling/v2", "HorizontalPodAutoscaler", "istiod", "istio-system"},
	{"policy/v1", "PodDisruptionBudget", "istiod", "istio-system"},
	{"apps/v1", "Deployment", "istiod", "istio-system"},
	{"/v1", "Service", "istiod", "istio-system"},
	{"/v1", "ConfigMap", "istio", "istio-system"},
	{"/v1", "ConfigMap", "istio-sidecar-injector", "istio-system"},
	{"/v1", "ServiceAccount", "istio-reader-service-account", "istio-system"},
	{"/v1", "ServiceAccount", "istiod", "istio-system"},
	{"rbac.authorization.k8s.io/v1", "RoleBinding", "istiod", "istio-system"},
	{"rbac.authorization.k8s.io/v1", "Role", "istiod", "istio-system"},
	{"admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "istio-sidecar-injector", ""},
	{"admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "istio-validator-istio-system", ""},
	{"rbac.authorization.k8s.io/v1", "ClusterRole", "istio-reader-clusterrole-istio-system", ""},
	{"rbac.authorization.k8s.io/v1", "ClusterRole", "istiod-clusterrole-istio-system", ""},
	{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "istio-reader-clusterrole-istio-system", ""},
	{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "istiod-clusterrole-istio-system", ""},
}

// newUninstallCmd is istioctl uninstall --purge as Istio's pages end with it. A lab's
// control plane is the lab's own and stays while the lab runs (`meshlab down` removes
// it), so uninstall removes what install set, the lab's mesh config (back to meshlab's
// defaults, as a reinstall starts from the profile's), and prints istioctl's lines.
func newUninstallCmd(g *globalFlags) *cobra.Command {
	var purge, yes bool
	var revision, file string
	cmd := &cobra.Command{
		Use:   "uninstall --purge [-y]",
		Short: "Uninstall Istio from the lab, as istioctl uninstall --purge (the lab keeps its control plane: this resets the mesh config install set)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case revision != "":
				return fmt.Errorf("--revision %s: a lab runs one control plane, without revisions; use --purge", revision)
			case file != "":
				return fmt.Errorf("-f %s: a lab removes its whole install; use --purge", file)
			case !purge:
				return errors.New("at least one of the --revision (or --set revision=<revision>), --filename or --purge flags must be set")
			}
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			out := cmd.OutOrStdout()
			const warning = "All Istio resources will be pruned from the cluster\n"
			if !yes {
				fmt.Fprint(out, warning+"Proceed? (y/N) ")
				if !confirmed(cmd.InOrStdin()) {
					fmt.Fprint(out, "Cancelled.\n")
					return errors.New("cancelled")
				}
			} else {
				fmt.Fprint(out, warning)
			}
			if err := setMeshConfig(cmd.Context(), c, nil, nil); err != nil {
				return err
			}
			for _, o := range uninstalledObjects {
				name := o.name + "." + o.namespace
				fmt.Fprintf(out, "  Removed %s, Kind=%s/%s.\n", o.gv, o.kind, name)
			}
			fmt.Fprintln(out, "✔ Uninstall complete")
			return nil
		},
	}
	cmd.Flags().BoolVar(&purge, "purge", false, "remove everything install made (a lab's one choice)")
	cmd.Flags().BoolVarP(&yes, "skip-confirmation", "y", false, "do not ask before uninstalling")
	cmd.Flags().StringVarP(&revision, "revision", "r", "", "refused: a lab has no revisions")
	cmd.Flags().StringVarP(&file, "filename", "f", "", "refused: a lab removes its whole install (--purge)")
	return cmd
}

package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
)

// deleteConfig is what `meshlab delete` reads.
type deleteConfig struct {
	files          []string
	namespace      string
	ignoreNotFound bool
	wait           bool          // --wait: return once every proxy runs the change
	timeout        time.Duration // --timeout: how long --wait waits
	selector       string        // -l: delete KIND's objects whose labels match
	all            bool          // --all: every object of KIND (in the namespace, or every one with -A)
	allNamespaces  bool          // -A: --all and -l look in every namespace
}

func newDeleteCmd(g *globalFlags) *cobra.Command {
	cfg := &deleteConfig{}
	var output string
	cmd := &cobra.Command{
		Use:   "delete (-f FILE|DIR|- | KIND NAME... | KIND/NAME... | KIND --all | KIND -l SELECTOR)",
		Short: "Delete objects from a running lab, each on its own as kubectl does",
		Long: `Delete objects from a running lab, each on its own as kubectl does.

delete namespace NAME... deletes every object stored in the namespace (its pods stopped,
their network namespaces removed) and then the namespace, in one change, as the API
server's namespace controller; a namespace created again starts empty. default,
kube-system and kube-public are refused, as Kubernetes refuses them. In Kubernetes
istiod goes with istio-system; a lab's control plane stays while the lab runs, so
deleting istio-system does what uninstall --purge does (the installed mesh config goes)
and deletes the objects stored in it (the profile's gateways, your config there);
istio-system stays listed, as the control plane's namespace.`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: completeArgs(false, labKinds(g), labObjects(g)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			var r api.DeleteRequest
			var nsFromFiles []string // the Namespaces of -f's files
			switch {
			case len(cfg.files) > 0 && len(args) > 0:
				return errors.New("give -f or KIND NAME, not both")
			case len(cfg.files) > 0:
				files, err := readConfigFiles(cfg.files, cmd.InOrStdin())
				if err != nil {
					return err
				}
				for i := range files {
					if cmd.Flags().Changed("namespace") {
						files[i].Namespace = cfg.namespace
					}
				}
				if cfg.selector != "" {
					var n int
					if files, n, err = selectFileObjects(files, cfg.selector); err != nil {
						return err
					}
					if n == 0 {
						fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
						return nil
					}
				}
				// A Namespace of the files goes with its objects, after the files' other
				// objects (deletens.go).
				if nsFromFiles, err = namespacesOfFiles(files); err != nil {
					return err
				}
				if len(nsFromFiles) > 0 {
					if files, _, err = filterFileObjects(files, func(_ api.ConfigFile, h fileHeader) bool { return h.Kind != "Namespace" }); err != nil {
						return err
					}
				}
				r.Files = files
			case cfg.all && (cfg.selector != "" || len(args) != 1):
				return errors.New("delete --all: give one KIND and no -l (kubectl delete KIND --all)")
			case cfg.selector != "" && len(args) != 1:
				return errors.New("delete -l SELECTOR: give one KIND (kubectl delete KIND -l SELECTOR)")
			case cfg.selector != "" || cfg.all:
				// resolved below, with the lab's objects
			case len(args) > 0:
				refs, err := deleteRefs(args, cfg.namespace)
				if err != nil {
					return err
				}
				r.Refs = refs
			default:
				return errors.New("give -f FILE, KIND NAME or KIND/NAME")
			}
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			if cfg.allNamespaces {
				if cfg.selector == "" && !cfg.all {
					return errors.New("error: a resource cannot be retrieved by name across all namespaces") //nolint:staticcheck // kubectl's text
				}
				cfg.namespace = ""
			}
			if len(cfg.files) == 0 && len(args) > 0 && isNamespaceKind(args[0]) && (cfg.all || cfg.selector != "") {
				// Namespaces go with their objects (deletens.go).
				nss, err := c.KubeObjects(cmd.Context(), "namespace", "", "", cfg.selector)
				if err != nil {
					return err
				}
				d := nsDeletion{ignoreNotFound: true, output: output}
				for _, o := range nss {
					d.names = append(d.names, o.Name)
				}
				if len(d.names) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
					return nil
				}
				return deleteNamespaces(cmd.Context(), c, d, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if names, ok := namespaceNames(args); ok && len(cfg.files) == 0 && !cfg.all && cfg.selector == "" {
				d := nsDeletion{names: names, ignoreNotFound: cfg.ignoreNotFound, output: output}
				if err := deleteNamespaces(cmd.Context(), c, d, cmd.OutOrStdout(), cmd.ErrOrStderr()); err != nil {
					return err
				}
				if cfg.wait {
					return c.WaitSynced(cmd.Context(), cfg.timeout)
				}
				return nil
			}
			if len(cfg.files) == 0 && len(args) > 0 && isPodsKind(args[0]) {
				// Pods go or are replaced by their workloads (deletepods.go).
				d := podDeletion{namespace: cfg.namespace, selector: cfg.selector, ignoreNotFound: cfg.ignoreNotFound}
				if !cfg.all && cfg.selector == "" {
					d.names = args[1:]
				}
				return deletePods(cmd.Context(), c, d, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if (cfg.selector != "" || cfg.all) && len(cfg.files) == 0 {
				lookup, err := kindResolver(cmd.Context(), c)
				if err != nil {
					return err
				}
				k, err := lookup(args[0])
				if err != nil {
					return err
				}
				objs, err := selectMetaObjects(cmd.Context(), c, k, cfg.namespace, cfg.selector)
				if err != nil {
					return err
				}
				for _, o := range objs {
					r.Refs = append(r.Refs, api.ObjectRef{Kind: o.kind.Kind, Namespace: o.namespace, Name: o.name})
				}
				if len(r.Refs) == 0 {
					if cfg.namespace == "" {
						fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
					} else {
						fmt.Fprintf(cmd.ErrOrStderr(), "No resources found in %s namespace.\n", cfg.namespace)
					}
					return nil
				}
			}
			// kubectl deletes each object on its own: what exists goes, each missing one
			// is its NotFound (silent with --ignore-not-found), and any makes exit status 1.
			var missing []error
			if len(r.Files) > 0 {
				kinds, err := c.Kinds(cmd.Context())
				if err != nil {
					return err
				}
				var gone []takenOut
				if r.Files, gone, err = takeOut(cmd.Context(), c, kinds, r.Files, cfg.namespace, true); err != nil {
					return err
				}
				for _, o := range gone {
					missing = append(missing, notFound(o.kind, o.name))
				}
			}
			var kept []api.ObjectRef
			for _, ref := range r.Refs {
				if err := checkObject(cmd.Context(), c, ref.Kind, ref.Namespace, ref.Name); err != nil {
					if !strings.HasPrefix(err.Error(), kubectlErrorPrefix) {
						return err
					}
					missing = append(missing, err)
					continue
				}
				kept = append(kept, ref)
			}
			r.Refs = kept
			if cfg.ignoreNotFound {
				missing = nil
			}
			if len(r.Refs) == 0 && len(r.Files) == 0 && len(nsFromFiles) == 0 {
				return errors.Join(missing...) // nothing named is there
			}
			if len(r.Refs) > 0 || len(r.Files) > 0 {
				changes, err := c.Delete(cmd.Context(), r)
				if err != nil {
					return err
				}
				kinds, _ := c.Kinds(cmd.Context())
				if err := printChanges(cmd.OutOrStdout(), cmd.ErrOrStderr(), output, changes, kinds); err != nil {
					return err
				}
			}
			if len(nsFromFiles) > 0 {
				d := nsDeletion{names: nsFromFiles, ignoreNotFound: cfg.ignoreNotFound, output: output}
				if err := deleteNamespaces(cmd.Context(), c, d, cmd.OutOrStdout(), cmd.ErrOrStderr()); err != nil {
					missing = append(missing, err)
				}
			}
			if cfg.wait {
				if err := c.WaitSynced(cmd.Context(), cfg.timeout); err != nil {
					return err
				}
			}
			return errors.Join(missing...)
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().StringSliceVarP(&cfg.files, "filename", "f", nil, "file, directory or - for stdin naming the objects to delete")
	cmd.Flags().BoolVar(&cfg.ignoreNotFound, "ignore-not-found", false, "treat an object the lab does not have as deleted, as kubectl's")
	cmd.Flags().StringVarP(&cfg.namespace, "namespace", "n", "default", "namespace of KIND NAME, or of -f's objects that name none")
	cmd.Flags().StringVarP(&cfg.selector, "selector", "l", "", "delete KIND's objects (or -f's objects) whose labels match (=, ==, !=, in, notin, exists)")
	cmd.Flags().BoolVar(&cfg.all, "all", false, "delete every object of KIND in the namespace (every namespace with -A), as kubectl's")
	cmd.Flags().BoolVarP(&cfg.allNamespaces, "all-namespaces", "A", false, "with --all or -l: look in every namespace, as kubectl's")
	cmd.Flags().BoolVar(&cfg.wait, "wait", false, "return once every proxy runs the change (all SYNCED), not once it is stored")
	cmd.Flags().DurationVar(&cfg.timeout, "timeout", 30*time.Second, "how long --wait waits")
	return cmd
}

// deleteRefs reads kubectl delete's object arguments: KIND NAME [NAME...], or
// KIND/NAME [KIND/NAME...] (kubectl refuses mixing the two forms, and so does this).
func deleteRefs(args []string, namespace string) ([]api.ObjectRef, error) {
	var refs []api.ObjectRef
	if kind, _, slash := strings.Cut(args[0], "/"); !slash {
		if len(args) == 1 {
			return nil, fmt.Errorf("delete %s: give the names to delete (KIND NAME...), or KIND/NAME", kind)
		}
		for _, name := range args[1:] {
			if strings.Contains(name, "/") || name == "" {
				return nil, fmt.Errorf("delete %s: %q: after a KIND, give names, not KIND/NAME", kind, name)
			}
			refs = append(refs, api.ObjectRef{Kind: kind, Namespace: namespace, Name: name})
		}
		return refs, nil
	}
	for _, a := range args {
		kind, name, ok := strings.Cut(a, "/")
		if !ok || kind == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("delete: %q: want KIND/NAME as every argument after the first KIND/NAME", a)
		}
		refs = append(refs, api.ObjectRef{Kind: kind, Namespace: namespace, Name: name})
	}
	return refs, nil
}

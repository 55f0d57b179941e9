package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/demoapp"
	"github.com/meshlab/meshlab/lab"
)

// applyConfig is what `meshlab apply` and `meshlab delete -f` read.
type applyConfig struct {
	files     []string      // -f: files, directories, or "-" for stdin
	namespace string        // -n: the namespace of objects that name none ("" for default)
	wait      bool          // --wait: return once every proxy runs the change
	timeout   time.Duration // --timeout: how long --wait waits
	selector  string        // -l: only the files' objects whose labels match
}

func newApplyCmd(g *globalFlags) *cobra.Command {
	cfg := &applyConfig{}
	var output string
	cmd := &cobra.Command{
		Use:   "apply [-n NAMESPACE] -f FILE|DIR|-",
		Short: "Create or replace Services, Workloads and Istio objects in a running lab, atomically",
		Long: `apply sends objects to a running lab: VirtualService, DestinationRule and ServiceEntry
(networking.istio.io v1alpha3, v1beta1 or v1), meshlab's MeshConfig, Services, and
Deployments, Pods and Workloads, whose pods are made, replaced or removed as Kubernetes
would (running pods and Services keep their addresses; apply waits for new pods and
prints a line for each). Objects replace those of the same kind, namespace and name.
Everything sent is validated together against the lab's objects before anything
changes; an error names the file, the object and the field.

apply returns once the change is validated and stored, as kubectl apply returns once
the API server has the objects; the proxies' new config is pushed after it (proxy-status
shows STALE until each proxy ACKs). --wait returns only once every proxy runs it
(all SYNCED), as after ` + "`meshlab wait`" + ` for convergence.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			files, err := readConfigFiles(cfg.files, cmd.InOrStdin())
			if err != nil {
				return err
			}
			for i := range files {
				// kubectl apply records what it applied in each object (create does not).
				files[i].Namespace, files[i].LastApplied = cfg.namespace, true
			}
			if cfg.selector != "" {
				var n int
				if files, n, err = selectFileObjects(files, cfg.selector); err != nil {
					return err
				}
				if n == 0 {
					return errors.New("no objects passed to apply")
				}
			}
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			changes, err := c.Apply(cmd.Context(), files)
			if isConflict(err) {
				return applyConflict(cmd.Context(), c, files, cfg.namespace, err)
			}
			if err != nil {
				return err
			}
			kinds, _ := c.Kinds(cmd.Context())
			if err := printChanges(cmd.OutOrStdout(), cmd.ErrOrStderr(), output, changes, kinds); err != nil {
				return err
			}
			if !cfg.wait {
				return nil
			}
			return c.WaitSynced(cmd.Context(), cfg.timeout)
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().StringSliceVarP(&cfg.files, "filename", "f", nil, "file, directory (its .yaml, .yml and .json files) or - for stdin; repeatable")
	cmd.Flags().StringVarP(&cfg.namespace, "namespace", "n", "", "namespace of the objects that name none, as kubectl apply -n (default: default); an object naming another is refused")
	cmd.Flags().StringVarP(&cfg.selector, "selector", "l", "", "apply only the objects whose labels match, as kubectl apply -l (app=reviews, 'version in (v1,v2)')")
	cmd.Flags().BoolVar(&cfg.wait, "wait", false, "return once every proxy runs the change (all SYNCED), not once it is stored")
	cmd.Flags().DurationVar(&cfg.timeout, "timeout", 30*time.Second, "how long --wait waits")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// readConfigURL reads kubectl's -f URL as the lab's outside world answers it: Istio's
// sample files (https://raw.githubusercontent.com/istio/istio/<ref>/samples/..., as the
// docs fetch them) from the Istio module meshlab is held to, whatever the ref. meshlab
// never fetches from the internet.
func readConfigURL(raw string) (api.ConfigFile, error) {
	u, err := url.Parse(raw)
	if err == nil && u.Host == demoapp.ExternalGitHubRaw {
		if local, ok := demoapp.IstioSampleFile(u.Path); ok {
			data, err := api.ReadFileLimited(local)
			if err != nil {
				return api.ConfigFile{}, err
			}
			return api.ConfigFile{Name: raw, Data: string(data)}, nil
		}
	}
	return api.ConfigFile{}, fmt.Errorf("read %s: a lab reaches no internet: its outside world answers https://%s/istio/istio/<ref>/samples/... (Istio's samples, from the module istio.io/istio@%s in %s, whatever the ref) and nothing else; save the file and give -f FILE",
		raw, demoapp.ExternalGitHubRaw, demoapp.IstioModuleVersion, demoapp.IstioModuleDir())
}

// readConfigFiles reads every file named, expanding directories (not recursively), and
// Istio's sample URLs (readConfigURL).
func readConfigFiles(names []string, stdin io.Reader) ([]api.ConfigFile, error) {
	var out []api.ConfigFile
	for _, n := range names {
		if n == "-" {
			data, err := api.ReadLimited("stdin", stdin)
			if err != nil {
				return nil, err
			}
			out = append(out, api.ConfigFile{Name: "<stdin>", Data: string(data)})
			continue
		}
		if strings.HasPrefix(n, "https://") || strings.HasPrefix(n, "http://") {
			f, err := readConfigURL(n)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
			continue
		}
		fi, err := os.Stat(n)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", n, err)
		}
		paths := []string{n}
		if fi.IsDir() {
			entries, err := os.ReadDir(n)
			if err != nil {
				return nil, fmt.Errorf("read directory %s: %w", n, err)
			}
			paths = paths[:0]
			for _, e := range entries {
				ext := strings.ToLower(filepath.Ext(e.Name()))
				if !e.IsDir() && slices.Contains([]string{".yaml", ".yml", ".json"}, ext) {
					paths = append(paths, filepath.Join(n, e.Name()))
				}
			}
			if len(paths) == 0 {
				return nil, fmt.Errorf("read directory %s: no .yaml, .yml or .json files", n)
			}
		}
		for _, p := range paths {
			data, err := api.ReadFileLimited(p)
			if err != nil {
				return nil, err
			}
			out = append(out, api.ConfigFile{Name: p, Data: string(data)})
		}
	}
	return out, nil
}

// apiClient returns a client of the running lab's API.
func (g *globalFlags) apiClient() (*api.Client, error) {
	name, err := g.existingLab()
	if err != nil {
		return nil, err
	}
	return api.NewUnixClient(lab.PathsFor(g.runRoot, name).APISocket()), nil
}

// kindsClient returns a client of the running lab's API and the lab's kinds (the caller
// closes the client).
func (g *globalFlags) kindsClient(ctx context.Context) (*api.Client, api.Kinds, error) {
	c, err := g.apiClient()
	if err != nil {
		return nil, nil, err
	}
	kinds, err := c.Kinds(ctx)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, kinds, nil
}

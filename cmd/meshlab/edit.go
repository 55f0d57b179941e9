package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/kubeedit"
)

// kubectl edit: the object as YAML in a temp file under kubectl's header, the user's
// editor on it (KUBE_EDITOR, EDITOR, vi), and what is saved applied as patch applies
// (label.go, patch.go); a save that fails reopens the file with why, as kubectl's. The
// istio ConfigMap in istio-system, which the lab renders from its mesh config, is edited
// as that mesh config: its data.mesh fields that `install -f` sets change the lab's
// MeshConfig, any other is refused by name.

// editIO is what edit's editor runs with.
type editIO struct {
	getenv              func(string) string
	stdin               io.Reader
	stdout, stderr      io.Writer // the editor's
	out, errOut         io.Writer // edit's own lines
	dir                 string    // where the temp file goes ("" for the system's)
	runEditor           func(args []string, in io.Reader, out, errOut io.Writer) error
	meshConfigMapFields []string // the mesh config's fields the lab honours
}

func newEditCmd(g *globalFlags) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "edit (TYPE NAME | TYPE/NAME)",
		Short: "Edit an object of a running lab in your editor, as kubectl edit",
		Long: `edit opens an object of a running lab as YAML in the editor named by KUBE_EDITOR, else
EDITOR, else vi, as kubectl edit does: as get -o yaml shows it. Saving writes only what
you changed, as kubectl's patch (validated, journalled, pushed) and prints "<resource>/<name> edited"; saving it
unchanged prints "Edit cancelled, no changes made."; a save the lab refuses reopens the
file with the error at its head. The istio ConfigMap in istio-system is the lab's mesh
config: its data.mesh fields ` + strings.Join(meshConfigInstallFields, ", ") + ` change the
lab as meshlab install -f does; any other field is refused by name.`,
		Example: `  meshlab edit configmap istio -n istio-system
  KUBE_EDITOR=nano meshlab edit svc/productpage`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeArgs(true, labKinds(g), labObjects(g)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			eio := editIO{
				getenv: os.Getenv, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
				out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), runEditor: runEditorProcess,
				meshConfigMapFields: meshConfigInstallFields,
			}
			return runEdit(cmd.Context(), c, namespace, args, eio)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the object (ignored for cluster-scoped kinds)")
	return cmd
}

// runEditorProcess runs the editor on the terminal, in kubectl's words when it fails.
func runEditorProcess(args []string, in io.Reader, out, errOut io.Writer) error {
	cmd := exec.Command(args[0], args[1:]...) //nolint:gosec // the user's own editor, as kubectl runs it
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, errOut
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return fmt.Errorf("unable to launch the editor %q", strings.Join(args, " "))
		}
		return fmt.Errorf("there was a problem with the editor %q", strings.Join(args, " "))
	}
	return nil
}

// editTarget is the object edit opens: stored as written, or the lab's mesh ConfigMap.
type editTarget struct {
	stored   *metaObject // nil for the mesh ConfigMap
	original []byte      // JSON, as the file first shows it
	ref      string      // configmap/istio
	plural   string      // configmaps
	name     string
}

// meshConfigMap is where the lab's mesh config shows as Istio's: istio-system/istio.
const meshConfigMapNamespace, meshConfigMapName = "istio-system", "istio"

func readEditTarget(ctx context.Context, c *api.Client, namespace string, t metaTarget) (*editTarget, error) {
	o, err := readMetaObject(ctx, c, namespace, t)
	if err == nil {
		// kubectl edit opens the object as the API server returns it: its defaults,
		// status and server fields, resourceVersion among them.
		ns := o.namespace
		if clusterScoped(t.kind) {
			ns = ""
		}
		views, err := c.KubeObjects(ctx, t.kind.Kind, ns, t.name, "")
		if err != nil {
			return nil, err
		}
		if len(views) != 1 {
			return nil, notFound(t.kind, t.name)
		}
		return &editTarget{stored: o, original: views[0].Object, ref: o.ref(), plural: t.kind.Resource(true), name: t.name}, nil
	}
	if t.kind.Kind == "ConfigMap" && namespace == meshConfigMapNamespace && t.name == meshConfigMapName {
		views, verr := c.KubeObjects(ctx, "ConfigMap", namespace, t.name, "")
		if verr == nil && len(views) == 1 {
			return &editTarget{original: views[0].Object, ref: "configmap/" + t.name, plural: "configmaps", name: t.name}, nil
		}
	}
	_, err = readStoredObject(ctx, c, namespace, t) // NotFound, or what makes it
	return nil, err
}

// runEdit is kubectl's edit loop for one object.
func runEdit(ctx context.Context, c *api.Client, namespace string, args []string, eio editIO) error {
	lookup, err := kindResolver(ctx, c)
	if err != nil {
		return err
	}
	targets, err := resolveMetaTargets(lookup, args)
	if err != nil {
		return err
	}
	if len(targets) != 1 {
		return fmt.Errorf("meshlab edit opens one object at a time (kubectl's list of several is not made): run it once for each of %d", len(targets))
	}
	target, err := readEditTarget(ctx, c, namespace, targets[0])
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(eio.dir, "meshlab-edit-*.yaml")
	if err != nil {
		return fmt.Errorf("create the edit file: %w", err)
	}
	path := f.Name()
	f.Close()
	keep := false
	defer func() {
		if !keep {
			os.Remove(path)
		}
	}()
	editorArgs, shell := kubeedit.EditorArgs(eio.getenv)
	file, err := kubeedit.RenderForEdit(target.original, nil)
	if err != nil {
		return fmt.Errorf("render %s: %w", target.ref, err)
	}
	containsError := false
	for {
		if err := os.WriteFile(path, file, 0o600); err != nil {
			return fmt.Errorf("write the edit file: %w", err)
		}
		if err := eio.runEditor(kubeedit.WithPath(editorArgs, shell, path), eio.stdin, eio.stdout, eio.stderr); err != nil {
			return err
		}
		saved, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read the edit file: %w", err)
		}
		if containsError && bytes.Equal(kubeedit.StripComments(saved), kubeedit.StripComments(file)) {
			keep = true
			fmt.Fprintf(eio.errOut, "A copy of your changes has been stored to %q\n", path)
			return errors.New("Edit cancelled, no valid changes were saved.") //nolint:staticcheck,revive // kubectl's text
		}
		edited, empty, err := kubeedit.ReadEdited(saved)
		if empty {
			fmt.Fprintln(eio.errOut, "Edit cancelled, saved file was empty.")
			return nil
		}
		if err != nil {
			fmt.Fprintf(eio.errOut, "error: %v\n", err)
			file, containsError = kubeedit.RenderText(kubeedit.StripComments(saved), []kubeedit.Reason{{Head: err.Error()}}), true
			continue
		}
		changed, err := kubeedit.Edited(target.original, edited)
		if err == nil && !changed {
			fmt.Fprintln(eio.errOut, "Edit cancelled, no changes made.")
			return nil
		}
		if err == nil {
			err = applyEdit(ctx, c, target, edited, eio.meshConfigMapFields)
		}
		if isConflict(err) {
			// kubectl's answer to a patch the API server refused for its version (the
			// user changed resourceVersion): the file is kept to write again. meshlab
			// has no replace verb: apply -f takes the file the same way.
			keep = true
			resource := target.plural
			if g := targets[0].kind.Group; g != "" {
				resource += "." + g
			}
			fmt.Fprintf(eio.out, "error: %s %q could not be patched: %s\n", resource, target.name, err)
			return fmt.Errorf("You can run `meshlab apply -f %s` to try this update again", path) //nolint:staticcheck,revive // kubectl's text
		}
		if err != nil {
			fmt.Fprintf(eio.errOut, "error: %s %q is invalid\n", target.plural, target.name)
			reason := kubeedit.Reason{Head: fmt.Sprintf("%s %q was not valid", target.plural, target.name), Causes: []string{err.Error()}}
			file, err = kubeedit.RenderForEdit(edited, []kubeedit.Reason{reason})
			if err != nil {
				return err
			}
			containsError = true
			continue
		}
		fmt.Fprintln(eio.out, target.ref+" edited")
		return nil
	}
}

// applyEdit applies an edited object: a stored one as patch does, the mesh ConfigMap as
// the mesh config it shows.
func applyEdit(ctx context.Context, c *api.Client, t *editTarget, edited []byte, honoured []string) error {
	if t.stored != nil {
		// Only the user's change is written, onto the object as stored (kubectl's
		// patch, applied by the API server to its latest object).
		patch, typ, err := kubeedit.EditPatch(t.original, edited)
		if err != nil {
			return err
		}
		stored, err := t.stored.json()
		if err != nil {
			return err
		}
		patched, _, err := kubeedit.Apply(stored, patch, typ)
		if err != nil {
			return err
		}
		_, err = c.Apply(ctx, []api.ConfigFile{t.stored.asFile(patched)})
		return err
	}
	return applyMeshConfigMap(ctx, c, t.original, edited, honoured)
}

// applyMeshConfigMap changes the lab's MeshConfig by what an edit changed in the istio
// ConfigMap's data.mesh: the fields install sets; any other change is refused by name.
func applyMeshConfigMap(ctx context.Context, c *api.Client, original, edited []byte, honoured []string) error {
	var before, after map[string]any
	if err := json.Unmarshal(original, &before); err != nil {
		return err
	}
	if err := json.Unmarshal(edited, &after); err != nil {
		return err
	}
	meshOf := func(cm map[string]any) (map[string]any, error) {
		data, _ := cm["data"].(map[string]any)
		text, _ := data["mesh"].(string)
		delete(data, "mesh")
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(text), &m); err != nil {
			return nil, fmt.Errorf("data.mesh: %w", err)
		}
		return m, nil
	}
	meshBefore, err := meshOf(before)
	if err != nil {
		return err
	}
	meshAfter, err := meshOf(after)
	if err != nil {
		return err
	}
	if changed := changedPaths(before, after); len(changed) > 0 {
		return fmt.Errorf("%s: the lab makes this ConfigMap from its mesh config, whose fields are data.mesh's; it keeps no other change", strings.Join(changed, ", "))
	}
	changed := changedPaths(meshBefore, meshAfter)
	for _, p := range changed {
		if !slices.Contains(honoured, p) {
			return fmt.Errorf("data.mesh: %s: meshlab's mesh config does not honour it (it honours %s)", p, strings.Join(honoured, ", "))
		}
	}
	spec, annotations, err := labMeshConfig(ctx, c)
	if err != nil {
		return err
	}
	for _, p := range changed {
		v, ok := valueAt(meshAfter, p)
		setPath(spec, p, v, ok)
	}
	return setMeshConfig(ctx, c, spec, annotations)
}

// changedPaths are the dotted paths of the leaves (lists whole) that differ between a
// and b, sorted.
func changedPaths(a, b map[string]any) []string {
	fa, fb := map[string]any{}, map[string]any{}
	flattenInto("", a, fa)
	flattenInto("", b, fb)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(fa)) {
		if v, ok := fb[k]; !ok || !reflect.DeepEqual(v, fa[k]) {
			out = append(out, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fb)) {
		if _, ok := fa[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func flattenInto(prefix string, m map[string]any, out map[string]any) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			flattenInto(prefix+k+".", sub, out)
			continue
		}
		out[prefix+k] = v
	}
}

func valueAt(m map[string]any, path string) (any, bool) {
	var v any = m
	for _, p := range strings.Split(path, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = mm[p]; !ok {
			return nil, false
		}
	}
	return v, true
}

// setPath sets (or, when !ok, removes) the dotted path in m: a list as it is
// (trustDomainAliases), any other value as a string (the mesh config's other honoured
// fields are strings and enums).
func setPath(m map[string]any, path string, v any, ok bool) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		sub, _ := m[p].(map[string]any)
		if sub == nil {
			sub = map[string]any{}
			m[p] = sub
		}
		m = sub
	}
	last := parts[len(parts)-1]
	if !ok {
		delete(m, last)
		return
	}
	if l, isList := v.([]any); isList {
		m[last] = l
		return
	}
	m[last] = fmt.Sprint(v)
}

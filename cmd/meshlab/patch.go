package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/kubeedit"
)

// kubectl patch: the object as the lab holds it, patched as the API server patches
// (kubeedit), then applied back as label does, so the patched object is validated,
// journalled and takes effect as an apply of the patched manifest would; nothing changes
// on an error.

// patchConfig is what patch reads from its flags.
type patchConfig struct {
	patch     string // -p: the patch's text
	patchFile string // --patch-file
	typ       string // --type
	namespace string // -n
}

func newPatchCmd(g *globalFlags) *cobra.Command {
	cfg := &patchConfig{}
	cmd := &cobra.Command{
		Use:   "patch (TYPE NAME... | TYPE/NAME...) (-p PATCH | --patch-file FILE) [--type strategic|merge|json]",
		Short: "Update fields of an object of a running lab with a strategic merge, JSON merge or JSON patch, as kubectl patch",
		Long: `patch changes an object of a running lab as kubectl patch does: --type strategic (the
default; kubectl's strategic merge with the Kubernetes types' merge keys: containers by
name, ports by port), merge (RFC 7386) or json (RFC 6902), the patch given as JSON or
YAML with -p or --patch-file. Istio's and the Gateway API's kinds are CRDs: strategic is
refused for them, as the API server refuses it. The patched object is applied to the lab
as an apply of it would be (validated with the lab's objects, journalled, pushed):
prints kubectl's "<resource>/<name> patched", or "patched (no change)".`,
		Example: `  meshlab patch service details -n bookinfo --type json -p '[{"op":"replace","path":"/spec/ports/0/name","value":"foo"}]'
  meshlab patch deployment httpbin --type=merge --patch-file=/tmp/httpbin-patch.yaml
  meshlab patch svc/productpage -p '{"metadata":{"labels":{"tier":"front"}}}'`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeArgs(true, labKinds(g), labObjects(g)),
		RunE: func(cmd *cobra.Command, args []string) error {
			typ, err := kubeedit.ParsePatchType(cfg.typ)
			if err != nil {
				return err
			}
			text, err := cfg.patchText()
			if err != nil {
				return err
			}
			patch, err := kubeedit.ParsePatch(text)
			if err != nil {
				return err
			}
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			return runPatch(cmd.Context(), c, cfg.namespace, args, patch, typ, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&cfg.patch, "patch", "p", "", "the patch, JSON or YAML, as kubectl's")
	cmd.Flags().StringVar(&cfg.patchFile, "patch-file", "", "a file holding the patch, JSON or YAML, as kubectl's")
	cmd.Flags().StringVar(&cfg.typ, "type", "strategic", "the patch's type: strategic, merge or json, as kubectl's")
	cmd.Flags().StringVarP(&cfg.namespace, "namespace", "n", "default", "namespace of the objects (ignored for cluster-scoped kinds)")
	return cmd
}

// patchText is -p's text or --patch-file's contents, in kubectl's words when neither or
// both are given.
func (cfg *patchConfig) patchText() ([]byte, error) {
	switch {
	case cfg.patch != "" && cfg.patchFile != "":
		return nil, errors.New("cannot specify --patch and --patch-file together")
	case cfg.patchFile != "":
		b, err := os.ReadFile(cfg.patchFile)
		if err != nil {
			return nil, fmt.Errorf("unable to read patch file: %w", err)
		}
		return b, nil
	}
	return []byte(cfg.patch), nil
}

// runPatch patches each object named and applies those it changed in one apply, then
// prints kubectl's line for each.
func runPatch(ctx context.Context, c *api.Client, namespace string, args []string, patch []byte, typ kubeedit.PatchType, out io.Writer) error {
	lookup, err := kindResolver(ctx, c)
	if err != nil {
		return err
	}
	targets, err := resolveMetaTargets(lookup, args)
	if err != nil {
		return err
	}
	var files []api.ConfigFile
	var lines []string
	for _, t := range targets {
		o, err := readStoredObject(ctx, c, namespace, t)
		var made *madeByLabError
		if errors.As(err, &made) && (t.kind.Kind == "Service" || t.kind.Kind == "Deployment") {
			patchMade := patchGatewayService
			if t.kind.Kind == "Deployment" {
				patchMade = patchGatewayDeployment // patch_gateway_deployment.go
			}
			line, err := patchMade(ctx, c, namespace, t, patch, typ, made)
			if err != nil {
				return err
			}
			lines = append(lines, line)
			continue
		}
		if err != nil {
			return err
		}
		original, err := o.json()
		if err != nil {
			return err
		}
		patched, changed, err := kubeedit.Apply(original, patch, typ)
		if err != nil {
			return err
		}
		if !changed {
			lines = append(lines, o.ref()+" patched (no change)")
			continue
		}
		lines = append(lines, o.ref()+" patched")
		files = append(files, o.asFile(patched))
	}
	if len(files) > 0 {
		if _, err := c.Apply(ctx, files); err != nil {
			return err
		}
	}
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	return nil
}

// readStoredObject reads one object patch or edit changes: an object of the lab as
// written, or a namespace that exists without one. What the lab makes without an object
// of its own (a workload's pods, istioctl's gateways' Services and Deployments, a Gateway
// API Gateway's automated ones) has nothing written to change: the error names what to
// change instead.
func readStoredObject(ctx context.Context, c *api.Client, namespace string, t metaTarget) (*metaObject, error) {
	o, err := readMetaObject(ctx, c, namespace, t)
	if err == nil {
		return o, nil
	}
	ns := namespace
	if clusterScoped(t.kind) {
		ns = ""
	}
	views, verr := c.KubeObjects(ctx, t.kind.Kind, ns, t.name, "")
	if verr != nil || len(views) == 0 {
		return nil, err
	}
	ref := t.kind.Resource(false) + "/" + t.name
	if t.kind.Kind == "Pod" {
		return nil, fmt.Errorf("%s in %s is made from a workload's template: change the template (spec.template) of the Deployment that made it", ref, ns)
	}
	return nil, &madeByLabError{fmt.Sprintf("%s in %s is made by the lab, not held as written: change what makes it (istioctl install's gateways: meshlab install -f IstioOperator.yaml's components; "+
		"a Gateway's automated Service and Deployment: the Gateway's spec.infrastructure; the kubernetes Service and Istio's ConfigMaps are the cluster's own)", ref, ns)}
}

// madeByLabError is readStoredObject's refusal of what the lab makes.
type madeByLabError struct{ msg string }

func (e *madeByLabError) Error() string { return e.msg }

// externalTrafficPolicyAnnotation is model.AnnotationExternalTrafficPolicy: on the lab's
// MeshConfig, the externalTrafficPolicy patched onto the gateway Services the lab makes.
const externalTrafficPolicyAnnotation = "meshlab.dev/external-traffic-policy"

// patchGatewayService patches a LoadBalancer Service the lab makes for a gateway
// (istioctl's, a Gateway's automated one): of its fields only spec.externalTrafficPolicy
// is the user's to change (authz-ingress's `patch svc istio-ingressgateway -p
// '{"spec":{"externalTrafficPolicy":"Local"}}'`); it is kept on the lab's MeshConfig and
// shown by get and describe. Any other change is refused by field: the rest is what the
// install or the Gateway makes.
func patchGatewayService(ctx context.Context, c *api.Client, namespace string, t metaTarget, patch []byte, typ kubeedit.PatchType, made error) (string, error) {
	views, err := c.KubeObjects(ctx, "Service", namespace, t.name, "")
	if err != nil {
		return "", err
	}
	if len(views) != 1 {
		return "", made
	}
	var view struct {
		Spec struct {
			Type string `json:"type"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(views[0].Object, &view); err != nil || view.Spec.Type != "LoadBalancer" {
		return "", made
	}
	ref := "service/" + t.name
	patched, changed, err := kubeedit.Apply(views[0].Object, patch, typ)
	if err != nil {
		return "", err
	}
	if !changed {
		return ref + " patched (no change)", nil
	}
	var before, after map[string]any
	if err := json.Unmarshal(views[0].Object, &before); err != nil {
		return "", err
	}
	if err := json.Unmarshal(patched, &after); err != nil {
		return "", err
	}
	for _, p := range changedPaths(before, after) {
		if p != "spec.externalTrafficPolicy" {
			return "", fmt.Errorf("%s: %s in %s is made by the lab, which keeps only spec.externalTrafficPolicy of a patch to it: change what makes it (istioctl install's gateways: meshlab install -f IstioOperator.yaml's components; "+
				"a Gateway's automated Service: the Gateway's spec.infrastructure)", p, ref, namespace)
		}
	}
	policy, _ := valueAt(after, "spec.externalTrafficPolicy")
	value, _ := policy.(string)
	if policy != nil && value != "Cluster" && value != "Local" {
		return "", fmt.Errorf("The Service %q is invalid: spec.externalTrafficPolicy: Unsupported value: %q: supported values: \"Cluster\", \"Local\"", t.name, fmt.Sprint(policy)) //nolint:staticcheck // the API server's text
	}
	spec, annotations, err := labMeshConfig(ctx, c)
	if err != nil {
		return "", err
	}
	set := map[string]string{}
	if s, ok := annotations[externalTrafficPolicyAnnotation].(string); ok {
		if err := json.Unmarshal([]byte(s), &set); err != nil {
			return "", fmt.Errorf("the lab's MeshConfig: annotation %s: %w", externalTrafficPolicyAnnotation, err)
		}
	}
	key := namespace + "/" + t.name
	if value == "" {
		delete(set, key)
	} else {
		set[key] = value
	}
	if len(set) == 0 {
		delete(annotations, externalTrafficPolicyAnnotation)
	} else {
		b, err := json.Marshal(set)
		if err != nil {
			return "", err
		}
		annotations[externalTrafficPolicyAnnotation] = string(b)
	}
	if err := setMeshConfig(ctx, c, spec, annotations); err != nil {
		return "", err
	}
	return ref + " patched", nil
}

// labMeshConfig returns the spec and annotations of the lab's MeshConfig (empty when it
// has none).
func labMeshConfig(ctx context.Context, c *api.Client) (spec, annotations map[string]any, err error) {
	spec, annotations = map[string]any{}, map[string]any{}
	have, err := c.Objects(ctx, "MeshConfig", "", "")
	if err != nil || len(have) == 0 {
		return spec, annotations, err
	}
	var mc struct {
		Metadata struct {
			Annotations map[string]any `json:"annotations"`
		} `json:"metadata"`
		Spec map[string]any `json:"spec"`
	}
	if err := json.Unmarshal(have[0].Object, &mc); err != nil {
		return nil, nil, fmt.Errorf("read the lab's MeshConfig: %w", err)
	}
	if mc.Spec != nil {
		spec = mc.Spec
	}
	if mc.Metadata.Annotations != nil {
		annotations = mc.Metadata.Annotations
	}
	return spec, annotations, nil
}

// json is the object as JSON.
func (o *metaObject) json() ([]byte, error) {
	b, err := json.Marshal(o.obj)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", o.ref(), err)
	}
	return b, nil
}

// asFile is data as the object's file, to apply in place of the object.
func (o *metaObject) asFile(data []byte) api.ConfigFile {
	f := api.ConfigFile{Name: o.file, Data: string(data)}
	if !clusterScoped(o.kind) {
		f.Namespace = o.namespace
	}
	return f
}

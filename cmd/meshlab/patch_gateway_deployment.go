package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/kubeedit"
)

// patchGatewayDeployment patches the Deployment of a gateway `meshlab install` made
// (istio-ingressgateway or istio-egressgateway in istio-system, as istioctl's): of it,
// the pod template's annotations and the istio-proxy container's env are the user's to
// change (secure-metrics' strategic patch of istio-ingressgateway). They are kept in the
// installed-state as that gateway's k8s.podAnnotations and k8s.env, which the lab makes
// the gateway's pod from (a changed template: a new pod, as a rollout), and which a later
// install with k8s settings replaces, as istioctl install overwrites a patched
// Deployment. Any other change is refused by field; nothing changes on an error.
func patchGatewayDeployment(ctx context.Context, c *api.Client, namespace string, t metaTarget, patch []byte, typ kubeedit.PatchType, made error) (string, error) {
	if namespace != "istio-system" || (t.name != "istio-ingressgateway" && t.name != "istio-egressgateway") {
		return "", made
	}
	spec, annotations, err := labMeshConfig(ctx, c)
	if err != nil {
		return "", err
	}
	stateText, _ := annotations[installedStateAnnotation].(string)
	var state map[string]any
	if stateText == "" || json.Unmarshal([]byte(stateText), &state) != nil {
		return "", made // not install's gateway: the lab makes it for the config's Gateways
	}
	gw := installedGatewayEntry(state, t.name)
	if gw == nil {
		return "", made
	}
	views, err := c.KubeObjects(ctx, "Deployment", namespace, t.name, "")
	if err != nil {
		return "", err
	}
	if len(views) != 1 {
		return "", made
	}
	var view map[string]any
	if err := json.Unmarshal(views[0].Object, &view); err != nil {
		return "", err
	}
	k8s, _ := gw["k8s"].(map[string]any)
	ref := "deployment.apps/" + t.name
	out, changed, err := patchGatewayK8s(view, k8s, patch, typ, ref, namespace)
	if err != nil {
		return "", err
	}
	if !changed {
		return ref + " patched (no change)", nil
	}
	if len(out) == 0 {
		delete(gw, "k8s")
	} else {
		gw["k8s"] = out
	}
	js, err := json.Marshal(state)
	if err != nil {
		return "", err
	}
	annotations[installedStateAnnotation] = string(js)
	if err := setMeshConfig(ctx, c, spec, annotations); err != nil {
		return "", err
	}
	return ref + " patched", nil
}

// installedGatewayEntry returns the enabled gateway component name of an installed-state
// IstioOperator (nil when the install has it off or not at all).
func installedGatewayEntry(state map[string]any, name string) map[string]any {
	s, _ := state["spec"].(map[string]any)
	comps, _ := s["components"].(map[string]any)
	for _, kind := range []string{"ingressGateways", "egressGateways"} {
		list, _ := comps[kind].([]any)
		for _, e := range list {
			g, _ := e.(map[string]any)
			if g["name"] == name && g["enabled"] == true {
				return g
			}
		}
	}
	return nil
}

// ensureMap returns m[k] as a map, making it when absent.
func ensureMap(m map[string]any, k string) map[string]any {
	if v, ok := m[k].(map[string]any); ok {
		return v
	}
	v := map[string]any{}
	m[k] = v
	return v
}

// patchGatewayK8s applies patch to view, the made Deployment ref of a gateway, with its
// pod template as the install's k8s settings keep it (podAnnotations, istio-proxy's env),
// and returns the k8s settings after it; a change of anything else is refused by field.
func patchGatewayK8s(view, k8s map[string]any, patch []byte, typ kubeedit.PatchType, ref, namespace string) (map[string]any, bool, error) {
	// The template as the install keeps it: its annotations and istio-proxy's env.
	tmpl := ensureMap(ensureMap(view, "spec"), "template")
	if a, ok := k8s["podAnnotations"].(map[string]any); ok && len(a) > 0 {
		ensureMap(tmpl, "metadata")["annotations"] = a
	}
	proxy := map[string]any{"name": "istio-proxy"}
	if env, ok := k8s["env"].([]any); ok && len(env) > 0 {
		proxy["env"] = env
	}
	ensureMap(tmpl, "spec")["containers"] = []any{proxy}
	before, err := json.Marshal(view)
	if err != nil {
		return nil, false, err
	}
	patched, changed, err := kubeedit.Apply(before, patch, typ)
	if err != nil || !changed {
		return nil, false, err
	}
	var b, a map[string]any
	if err := json.Unmarshal(before, &b); err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal(patched, &a); err != nil {
		return nil, false, err
	}
	refuse := func(field, why string) error {
		return fmt.Errorf("%s: %s in %s is made by the lab, which keeps only the pod template's annotations and the istio-proxy container's env of a patch to it%s: change what makes it (meshlab install -f IstioOperator.yaml's components.ingressGateways[].k8s)", field, ref, namespace, why)
	}
	for _, p := range changedPaths(b, a) {
		if p != "spec.template.metadata.annotations" && !strings.HasPrefix(p, "spec.template.metadata.annotations.") && p != "spec.template.spec.containers" {
			return nil, false, refuse(p, "")
		}
	}
	out := map[string]any{}
	if v, _ := valueAt(a, "spec.template.metadata.annotations"); v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false, refuse("spec.template.metadata.annotations", " (a map of strings)")
		}
		for k, s := range m {
			if _, ok := s.(string); !ok {
				return nil, false, refuse("spec.template.metadata.annotations."+k, " (a string)")
			}
		}
		if len(m) > 0 {
			out["podAnnotations"] = m
		}
	}
	containers, _ := valueAt(a, "spec.template.spec.containers")
	list, _ := containers.([]any)
	if len(list) != 1 {
		return nil, false, refuse("spec.template.spec.containers", " (the one container istio-proxy)")
	}
	c0, _ := list[0].(map[string]any)
	for k := range c0 {
		if k != "name" && k != "env" {
			return nil, false, refuse("spec.template.spec.containers[name=istio-proxy]."+k, "")
		}
	}
	if c0["name"] != "istio-proxy" {
		return nil, false, refuse("spec.template.spec.containers[0].name", " (the one container istio-proxy)")
	}
	if env, ok := c0["env"].([]any); ok && len(env) > 0 {
		for i, e := range env {
			m, _ := e.(map[string]any)
			name, _ := m["name"].(string)
			_, isString := m["value"].(string)
			_, hasValue := m["value"]
			if name == "" || len(m) > 2 || (hasValue && !isString) {
				return nil, false, refuse(fmt.Sprintf("spec.template.spec.containers[name=istio-proxy].env[%d]", i), " (name and a literal value)")
			}
		}
		out["env"] = env
	}
	return out, true, nil
}

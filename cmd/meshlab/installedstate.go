package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshlab/meshlab/api"
)

// The installed-state IstioOperator: what `istioctl install` wrote into the cluster
// (istio-system/installed-state) up to Istio 1.23, the profile it installed with the
// user's settings over it, which Istio's pages read (`kubectl get istiooperator
// installed-state -n istio-system -o jsonpath='{.spec.meshConfig.outboundTrafficPolicy.mode}'`).
// Today's istioctl writes none; a lab's install keeps it as the Istio the pages were
// written for did, as an annotation of the MeshConfig install writes (install owns both,
// uninstall --purge removes both), and get and describe show it as kubectl shows a
// custom resource.

const (
	installedStateName      = "installed-state"
	installedStateNamespace = "istio-system"
	// installedStateAnnotation is controlplane/config's InstalledStateAnnotation: the lab
	// makes the gateways this IstioOperator enables.
	installedStateAnnotation = "meshlab.dev/installed-state"
)

// isIstioOperatorKind reports whether kind is kubectl's spelling of IstioOperators.
func isIstioOperatorKind(kind string) bool {
	switch strings.ToLower(kind) {
	case "istiooperator", "istiooperators", "iop", "io", "istiooperators.install.istio.io", "istiooperator.install.istio.io":
		return true
	}
	return false
}

// installedState is the IstioOperator istioctl wrote for the install plan p at time
// created: the profile's components, hub and tag, the mesh config given over the
// profile's, and the values the profile sets.
func installedState(p installPlan, created time.Time) map[string]any {
	on := func(c string) bool {
		for _, have := range p.components {
			if have == c {
				return true
			}
		}
		return false
	}
	enabled := func(c string) map[string]any { return map[string]any{"enabled": on(c)} }
	mesh := p.meshConfig()
	switch _, given := p.mesh["accessLogFile"]; {
	case p.profile == "demo" && !given:
		mesh["accessLogFile"] = "/dev/stdout" // the demo profile's, written in its IstioOperator
	case !given:
		delete(mesh, "accessLogFile") // the lab's way of saying "no access log", which no profile writes
	}
	values := map[string]any{
		"defaultRevision": "",
		"global":          map[string]any{"configValidation": true, "istioNamespace": installedStateNamespace},
	}
	if p.profile != "default" {
		values["profile"] = p.profile
	}
	if len(p.pilotEnv) > 0 {
		env := map[string]any{}
		for k, v := range p.pilotEnv {
			env[k] = v
		}
		values["pilot"] = map[string]any{"env": env}
	}
	return map[string]any{
		"apiVersion": "install.istio.io/v1alpha1",
		"kind":       "IstioOperator",
		"metadata": map[string]any{
			"annotations":       map[string]any{"install.istio.io/ignoreReconcile": "true"},
			"creationTimestamp": created.UTC().Format(time.RFC3339),
			"name":              installedStateName,
			"namespace":         installedStateNamespace,
		},
		"spec": map[string]any{
			"components": map[string]any{
				"base":            enabled("core"),
				"cni":             enabled("cni"),
				"egressGateways":  []any{installedGateway(p, "istio-egressgateway", on("egress"))},
				"ingressGateways": []any{installedGateway(p, "istio-ingressgateway", on("ingress"))},
				"pilot":           enabled("istiod"),
				"ztunnel":         enabled("ztunnel"),
			},
			"hub":        "docker.io/istio",
			"meshConfig": mesh,
			"profile":    p.profile,
			"tag":        injectIstioVersion,
			"values":     values,
		},
	}
}

// readInstalledState returns the installed-state IstioOperator the lab's install keeps,
// decoded with json.Number, or nil when nothing was installed (or it was uninstalled).
func readInstalledState(ctx context.Context, c *api.Client) (map[string]any, error) {
	objs, err := c.Objects(ctx, "MeshConfig", "", "")
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		mc, err := decodeObject(o.Object)
		if err != nil {
			return nil, err
		}
		meta, _ := mc["metadata"].(map[string]any)
		s := stringMap(meta["annotations"])[installedStateAnnotation]
		if s == "" {
			continue
		}
		return decodeObject([]byte(s))
	}
	return nil, nil
}

// installedStateNotFound is kubectl's answer for the installed-state a lab does not
// have, with where it comes from.
func installedStateNotFound(name string) error {
	return fmt.Errorf("Error from server (NotFound): istiooperators.install.istio.io %q not found (meshlab: `meshlab install` writes %s/%s, as istioctl install did up to Istio 1.23)", //nolint:staticcheck // kubectl's text
		name, installedStateNamespace, installedStateName)
}

// getIstioOperators is `get istiooperator [NAME]`: the install's installed-state in the
// table, yaml, json and jsonpath forms.
func getIstioOperators(ctx context.Context, c *api.Client, cfg *getConfig, name, tmpl string, asJSON, isJSONPath bool, out io.Writer) error {
	iop, err := readInstalledState(ctx, c)
	if err != nil {
		return err
	}
	if iop != nil && ((cfg.namespace != "" && cfg.namespace != installedStateNamespace) || (name != "" && name != installedStateName)) {
		iop = nil
	}
	if iop == nil {
		if name != "" {
			return installedStateNotFound(name)
		}
		if isJSONPath || !cfg.textOutput() {
			iop = nil // an empty List below
		} else {
			if cfg.namespace == "" {
				fmt.Fprintln(out, "No resources found")
			} else {
				fmt.Fprintf(out, "No resources found in %s namespace.\n", cfg.namespace)
			}
			return nil
		}
	}
	var items []json.RawMessage
	if iop != nil {
		b, err := json.Marshal(iop)
		if err != nil {
			return err
		}
		items = append(items, b)
	}
	switch {
	case isJSONPath:
		p, err := newJSONPathPrinter(tmpl, asJSON)
		if err != nil {
			return err
		}
		return p.print(out, items, name == "")
	case cfg.textOutput():
		// The IstioOperator CRD's columns: REVISION and STATUS (the in-cluster
		// operator's, which an install's installed-state never has), AGE.
		tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
		heads := []string{"NAME", "REVISION", "STATUS", "AGE"}
		if cfg.namespace == "" {
			heads = append([]string{"NAMESPACE"}, heads...)
		}
		fmt.Fprintln(tw, strings.Join(append(heads, cfg.labelCols.heads()...), "\t"))
		meta, _ := iop["metadata"].(map[string]any)
		row := []string{installedStateName, "", "", age(stringAt(meta, "creationTimestamp"), time.Now())}
		if cfg.namespace == "" {
			row = append([]string{installedStateNamespace}, row...)
		}
		labels := stringMap(meta["labels"])
		fmt.Fprintln(tw, strings.Join(append(row, cfg.labelCols.cells(labels)...), "\t"))
		return tw.Flush()
	}
	return printKube(out, cfg.output, items, name != "")
}

// installedGateway is a gateway component of the installed-state: its name, whether the
// install turned it on, and the k8s settings given for it (podAnnotations, env), which
// the lab puts on the gateway's pod template.
func installedGateway(p installPlan, name string, enabled bool) map[string]any {
	g := map[string]any{"enabled": enabled, "name": name}
	if k := p.gatewayK8s[name]; k != nil {
		k8s := map[string]any{}
		if len(k.PodAnnotations) > 0 {
			a := map[string]any{}
			for n, v := range k.PodAnnotations {
				a[n] = v
			}
			k8s["podAnnotations"] = a
		}
		if len(k.Env) > 0 {
			env := make([]any, 0, len(k.Env))
			for _, e := range k.Env {
				env = append(env, map[string]any{"name": e.Name, "value": e.Value})
			}
			k8s["env"] = env
		}
		if len(k8s) > 0 {
			g["k8s"] = k8s
		}
	}
	return g
}

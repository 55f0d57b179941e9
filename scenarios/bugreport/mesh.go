package bugreport

import (
	"fmt"
	"slices"

	"sigs.k8s.io/yaml"
)

// meshFields are the MeshConfig fields meshlab implements (controlplane/config's
// MeshConfig): kept as the cluster set them.
var meshFields = []string{"outboundTrafficPolicy", "rootNamespace", "accessLogFile", "accessLogEncoding", "accessLogFormat"}

// inertMesh are mesh config fields a cluster sets that change nothing a lab runs, with
// why; the mesh config of Istio's default and demo profiles sets them. They are ignored
// with one note each. Every other field reaches the loader, which refuses what it does
// not implement by name.
var inertMesh = map[string]string{
	"defaultConfig.discoveryAddress": "the lab's proxies reach the lab's own xDS socket",
	"defaultConfig.tracing":          "tracing samples spans; it routes no request",
	"enableTracing":                  "tracing samples spans; it routes no request",
	"defaultProviders.metrics":       "metrics providers count requests; they route none",
	"enablePrometheusMerge":          "how Prometheus scrapes a pod, not how it is reached",
	"extensionProviders":             "providers are used only where a Telemetry or CUSTOM AuthorizationPolicy names one, and the loader refuses those that name one meshlab lacks",
	"trustDomainAliases":             "the lab has one trust domain",
}

// meshOrigin is the mesh config's place in the report, for Locate.
type meshOrigin struct {
	file string
	*meshSource
}

// meshConfig returns the report's mesh config as a MeshConfig document (nil when the
// report holds none): the istio ConfigMap of the Istio namespace, else istiod's own
// debug/mesh.
func (r *Report) meshConfig(fs *files) (map[string]any, meshOrigin, error) {
	for _, it := range listItems(fs.data[marker]) {
		h := headerOf(it)
		if h.kind != "ConfigMap" || h.name != "istio" || h.namespace != "istio-system" {
			continue
		}
		at := fmt.Sprintf("%s: ConfigMap %s/%s", marker, h.namespace, h.name)
		data, _ := it["data"].(map[string]any)
		text, _ := data["mesh"].(string)
		if nets, _ := data["meshNetworks"].(string); nets != "" && nets != "networks: {}" {
			r.note("%s: data.meshNetworks ignored: a lab is one network", at)
		}
		var mesh map[string]any
		if err := yaml.Unmarshal([]byte(text), &mesh); err != nil {
			return nil, meshOrigin{}, fmt.Errorf("--from-bug-report %s: %s: data.mesh: %w", r.Source, at, err)
		}
		spec := r.meshSpec(mesh, at+": data.mesh")
		r.note("%s: the mesh config", at)
		return meshDocument(spec), meshOrigin{marker, &meshSource{"ConfigMap", h.namespace, h.name, "data.mesh"}}, nil
	}
	for _, pod := range fs.istiods {
		f := "istio/" + pod + "/debug/mesh"
		data, ok := fs.data[f]
		if !ok {
			continue
		}
		var mesh map[string]any
		if err := yaml.Unmarshal(data, &mesh); err != nil {
			return nil, meshOrigin{}, fmt.Errorf("--from-bug-report %s: %s: %w", r.Source, f, err)
		}
		// istiod's effective mesh config spells out every default, which meshlab cannot
		// tell from a choice: only the fields meshlab implements are read.
		spec := map[string]any{}
		skipped := 0
		for _, k := range sortedMapKeys(mesh) {
			if slices.Contains(meshFields, k) {
				spec[k] = mesh[k]
			} else {
				skipped++
			}
		}
		r.note("%s: the mesh config (no istio ConfigMap in the report): its %d fields besides %v are istiod's effective config, defaults included, and not read", f, skipped, meshFields)
		return meshDocument(spec), meshOrigin{f, &meshSource{field: "spec"}}, nil
	}
	r.note("no mesh config in the report (neither the istio ConfigMap nor istiod's debug/mesh): the lab runs meshlab's defaults")
	return nil, meshOrigin{}, nil
}

// meshSpec turns a cluster's mesh config into a MeshConfig spec: inert fields dropped
// with a note each, the rest kept for the loader to take or refuse by name.
func (r *Report) meshSpec(mesh map[string]any, at string) map[string]any {
	spec := map[string]any{}
	for _, k := range sortedMapKeys(mesh) {
		v := mesh[k]
		if why := inertMesh[k]; why != "" {
			r.note("%s.%s ignored: %s", at, k, why)
			continue
		}
		switch k {
		case "trustDomain":
			if v == "cluster.local" {
				continue // the lab's own
			}
		case "defaultConfig", "defaultProviders":
			sub, ok := v.(map[string]any)
			if !ok {
				break
			}
			kept := map[string]any{}
			for _, sk := range sortedMapKeys(sub) {
				sv := sub[sk]
				if why := inertMesh[k+"."+sk]; why != "" {
					r.note("%s.%s.%s ignored: %s", at, k, sk, why)
					continue
				}
				if m, ok := sv.(map[string]any); ok && len(m) == 0 {
					continue
				}
				kept[sk] = sv
			}
			if len(kept) == 0 {
				continue
			}
			v = kept
		}
		spec[k] = v
	}
	// Istio writes no access log unless accessLogFile is set; meshlab's default is
	// /dev/stdout, so the cluster's choice is made explicit.
	if _, ok := spec["accessLogFile"]; !ok {
		spec["accessLogFile"] = ""
		r.note("%s: no accessLogFile: the proxies write no access log, as on the cluster", at)
	}
	return spec
}

func meshDocument(spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "meshlab.dev/v1alpha1",
		"kind":       "MeshConfig",
		"metadata":   map[string]any{"name": "mesh"},
		"spec":       spec,
	}
}

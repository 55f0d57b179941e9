package lab

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/meshlab/meshlab/controlplane/config"
)

// The Gateway API CRDs' schema defaults, which the API server writes into what it
// stores (sigs.k8s.io/gateway-api's +kubebuilder:default markers): a parentRef's group
// gateway.networking.k8s.io and kind Gateway, a backendRef's group "" and kind Service
// and weight 1, an HTTPRoute's rule without matches matching the path prefix /, a path
// match's type PathPrefix and value /, a header or query match's type Exact, a
// listener's allowedRoutes from the Gateway's namespace, a TLS listener's mode
// Terminate. Istio's gateway controller copies the defaulted parentRef into each route's
// status. `kubectl get httproute -o yaml` shows them, as the TCP traffic shifting page
// prints its TCPRoute.

// gatewayAPIGroup is the Gateway API's group.
const gatewayAPIGroup = "gateway.networking.k8s.io"

// isGatewayAPIRoute reports whether kind is a Gateway API route kind.
func isGatewayAPIRoute(kind string) bool {
	switch kind {
	case "HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute":
		return true
	}
	return false
}

// withGatewayAPIDefaults returns raw, an object of kind, with the Gateway API CRDs'
// defaults; any other kind's as it is.
func withGatewayAPIDefaults(kind string, raw []byte) ([]byte, error) {
	if !isGatewayAPIRoute(kind) && kind != config.GatewayAPIGatewayKind {
		return raw, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var obj map[string]any
	if err := d.Decode(&obj); err != nil {
		return nil, fmt.Errorf("read %s: %w", kind, err)
	}
	spec, _ := obj["spec"].(map[string]any)
	if spec == nil {
		return raw, nil
	}
	if kind == config.GatewayAPIGatewayKind {
		for _, l := range mapsOf(spec["listeners"]) {
			if _, ok := l["allowedRoutes"]; !ok {
				l["allowedRoutes"] = map[string]any{"namespaces": map[string]any{"from": "Same"}}
			} else if ar, ok := l["allowedRoutes"].(map[string]any); ok {
				if _, has := ar["namespaces"]; !has {
					ar["namespaces"] = map[string]any{"from": "Same"}
				} else if ns, ok := ar["namespaces"].(map[string]any); ok {
					setDefault(ns, "from", "Same")
				}
			}
			if tls, ok := l["tls"].(map[string]any); ok {
				setDefault(tls, "mode", "Terminate")
			}
		}
		return json.Marshal(obj)
	}
	for _, p := range mapsOf(spec["parentRefs"]) {
		defaultParentRef(p)
	}
	if st, ok := obj["status"].(map[string]any); ok {
		for _, p := range mapsOf(st["parents"]) {
			if ref, ok := p["parentRef"].(map[string]any); ok {
				defaultParentRef(ref)
			}
		}
	}
	if kind == "HTTPRoute" {
		if _, ok := spec["rules"]; !ok {
			spec["rules"] = []any{map[string]any{}}
		}
	}
	for _, r := range mapsOf(spec["rules"]) {
		for _, b := range mapsOf(r["backendRefs"]) {
			setDefault(b, "group", "")
			setDefault(b, "kind", "Service")
			setDefault(b, "weight", json.Number("1"))
		}
		if kind != "HTTPRoute" {
			continue
		}
		if _, ok := r["matches"]; !ok {
			r["matches"] = []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"}}}
		}
		for _, m := range mapsOf(r["matches"]) {
			if p, ok := m["path"].(map[string]any); ok {
				setDefault(p, "type", "PathPrefix")
				setDefault(p, "value", "/")
			}
			for _, h := range mapsOf(m["headers"]) {
				setDefault(h, "type", "Exact")
			}
			for _, q := range mapsOf(m["queryParams"]) {
				setDefault(q, "type", "Exact")
			}
		}
	}
	return json.Marshal(obj)
}

// defaultParentRef fills a parentRef's group and kind.
func defaultParentRef(p map[string]any) {
	setDefault(p, "group", gatewayAPIGroup)
	setDefault(p, "kind", "Gateway")
}

// setDefault sets m[key] to v unless m has the key.
func setDefault(m map[string]any, key string, v any) {
	if _, ok := m[key]; !ok {
		m[key] = v
	}
}

// mapsOf returns the mappings of a list (others left out).
func mapsOf(v any) []map[string]any {
	l, _ := v.([]any)
	out := make([]map[string]any, 0, len(l))
	for _, e := range l {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

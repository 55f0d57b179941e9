package config

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	extensions "istio.io/api/extensions/v1alpha1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// TrafficExtension (extensions.istio.io v1alpha1) is read for its Lua filter, what
// istio.io's "Extend waypoints with Lua scripts" page applies: attached by targetRefs
// to a Gateway API gateway or a waypoint (a Gateway), or to a Service's chains on its
// waypoint, in its phase (AUTHN, AUTHZ, STATS or unspecified) and priority, for the
// matching mode (a gateway is CLIENT, a waypoint SERVER) and ports, as istiod's
// TrafficExtensionsByListenerInfo; the proxy runs the script (dataplane/proxy/filters/
// lua). What would change behaviour and is not built is refused by name: a Wasm filter
// (the proxy has no Wasm VM), a selector (extensions on sidecars are not built).

func trafficExtensionPaths() string {
	return strings.Join([]string{
		"targetRefs phase priority match lua",
		expand("targetRefs", "group kind name namespace"),
		expand("match", "mode ports"),
		"match.ports.number lua.inlineCode",
	}, " ")
}

var trafficExtensionFields = lazyFields(trafficExtensionPaths)

// validateTrafficExtension checks a TrafficExtension on its own.
func validateTrafficExtension(t *extensions.TrafficExtension, p problems) {
	if t.GetWasm() != nil {
		p.addf("spec.wasm", "is not supported by meshlab: its proxy has no Wasm runtime (Envoy's envoy.wasm); write the filter as spec.lua (inlineCode), which the proxy runs")
	}
	if t.GetSelector() != nil {
		p.addf("spec.selector", "is not supported by meshlab: TrafficExtensions on sidecars are not built; attach it with targetRefs to a Gateway API gateway, a waypoint, or a Service on its waypoint")
	}
	rest := proto.Clone(t).(*extensions.TrafficExtension) // wasm and selector refused above
	rest.FilterConfig, rest.Selector = nil, nil
	refuseUnimplemented(rest.ProtoReflect(), trafficExtensionFields(), "TrafficExtension", p)
	if t.GetWasm() == nil && t.GetLua() == nil {
		p.addf("spec", "one of lua or wasm is required")
	}
	if t.GetLua() != nil && t.GetLua().GetInlineCode() == "" {
		p.addf("spec.lua.inlineCode", "is required")
	}
	if t.GetSelector() == nil && len(t.GetTargetRefs()) == 0 {
		p.addf("spec.targetRefs", "is required by meshlab: without targetRefs or selector Istio applies the extension to every sidecar of the namespace, which meshlab does not build; target a Gateway API gateway, a waypoint, or a Service on its waypoint")
	}
	checkPolicyTargets(t.GetSelector(), nil, t.GetTargetRefs(), p)
	for i, r := range t.GetTargetRefs() {
		if model.PolicyTargetKind(r) == model.TargetGatewayClass {
			p.addf(fmt.Sprintf("spec.targetRefs[%d]", i), "a GatewayClass target is not supported by meshlab for TrafficExtensions; target the Gateway")
		}
	}
}

// trafficExtensionModel is the model form of a TrafficExtension.
func trafficExtensionModel(o *Object) *model.IstioConfig[*extensions.TrafficExtension] {
	t := proto.Clone(o.TrafficExtension).(*extensions.TrafficExtension)
	return &model.IstioConfig[*extensions.TrafficExtension]{Name: o.Origin.Name, Namespace: o.Origin.Namespace, Spec: t, Origin: o.Origin}
}

package xds

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	luav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extensions "istio.io/api/extensions/v1alpha1"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// TrafficExtensionResourcePrefix names a TrafficExtension's HTTP filter, as istiod's
// TrafficExtensionResourceNamePrefix: the filter is
// extensions.istio.io/trafficextension/<namespace>.<name>.
const TrafficExtensionResourcePrefix = "extensions.istio.io/trafficextension/"

// extensionFilters are the TrafficExtensions' HTTP filters of a chain, by phase, each
// phase's in priority order.
type extensionFilters map[extensions.TrafficExtension_ExecutionPhase][]*hcm.HttpFilter

// trafficExtensions returns the Lua filters of the TrafficExtensions that attach (as
// applies says) and match a chain of mode (a gateway's chains are CLIENT, a waypoint's
// SERVER) and port, as istiod's TrafficExtensionsByListenerInfo: by phase, highest
// priority first (no priority: the lowest), model order among equals.
func trafficExtensions(m *model.Model, applies func(*model.IstioConfig[*extensions.TrafficExtension]) bool, mode typev1beta1.WorkloadMode, port uint32) (extensionFilters, error) {
	var picked []*model.IstioConfig[*extensions.TrafficExtension]
	for _, te := range m.Istio.TrafficExtensions {
		if te == nil || te.Spec.GetLua() == nil || !applies(te) || !extensionMatches(te.Spec, mode, port) {
			continue
		}
		picked = append(picked, te)
	}
	if len(picked) == 0 {
		return nil, nil
	}
	priority := func(te *model.IstioConfig[*extensions.TrafficExtension]) int32 {
		if p := te.Spec.GetPriority(); p != nil {
			return p.GetValue()
		}
		return math.MinInt32
	}
	slices.SortStableFunc(picked, func(a, b *model.IstioConfig[*extensions.TrafficExtension]) int {
		return cmp.Compare(priority(b), priority(a))
	})
	out := extensionFilters{}
	for _, te := range picked {
		cfg, err := typed(&luav3.Lua{DefaultSourceCode: &corev3.DataSource{
			Specifier: &corev3.DataSource_InlineString{InlineString: te.Spec.GetLua().GetInlineCode()},
		}})
		if err != nil {
			return nil, fmt.Errorf("build lua filter of TrafficExtension %s/%s: %w", te.Namespace, te.Name, err)
		}
		ph := te.Spec.GetPhase()
		out[ph] = append(out[ph], &hcm.HttpFilter{
			Name:       TrafficExtensionResourcePrefix + te.Namespace + "." + te.Name,
			ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: cfg},
		})
	}
	return out, nil
}

// extensionMatches reports whether a TrafficExtension's match selects a chain of mode
// and port: no match selects all; a selector matches when its mode is unset,
// CLIENT_AND_SERVER or the chain's, and its ports are none or include port.
func extensionMatches(te *extensions.TrafficExtension, mode typev1beta1.WorkloadMode, port uint32) bool {
	if len(te.GetMatch()) == 0 {
		return true
	}
	for _, s := range te.GetMatch() {
		switch s.GetMode() {
		case typev1beta1.WorkloadMode_UNDEFINED, typev1beta1.WorkloadMode_CLIENT_AND_SERVER, mode:
		default:
			continue
		}
		if len(s.GetPorts()) == 0 {
			return true
		}
		for _, p := range s.GetPorts() {
			if p.GetNumber() != 0 && p.GetNumber() == port {
				return true
			}
		}
	}
	return false
}

// gatewayExtensions are the extension filters of a Gateway API gateway pod's chains on
// port: the TrafficExtensions of its namespace targeting its Gateway.
func gatewayExtensions(m *model.Model, pod *model.Pod, port uint16) (extensionFilters, error) {
	gw, ok := pod.Labels[model.GatewayAPINameLabel]
	if !ok || len(m.Istio.TrafficExtensions) == 0 {
		return nil, nil
	}
	return trafficExtensions(m, func(te *model.IstioConfig[*extensions.TrafficExtension]) bool {
		return te.Namespace == pod.Namespace && model.TargetsGateway(model.TargetRefs(te.Spec.GetTargetRefs()), pod.Namespace, gw)
	}, typev1beta1.WorkloadMode_CLIENT, uint32(port))
}

// waypointExtensions are the extension filters of waypoint w's chains of service svc
// (nil: its chains of no service) on port: the TrafficExtensions targeting w's
// Gateway, or svc.
func waypointExtensions(m *model.Model, w *model.Waypoint, svc *model.Service, port uint32) (extensionFilters, error) {
	if w == nil || len(m.Istio.TrafficExtensions) == 0 {
		return nil, nil
	}
	root := m.Mesh.Root()
	return trafficExtensions(m, func(te *model.IstioConfig[*extensions.TrafficExtension]) bool {
		return model.AttachesToWaypoint(model.TargetRefs(te.Spec.GetTargetRefs()), te.Namespace, root, w, svc)
	}, typev1beta1.WorkloadMode_SERVER, port)
}

// Package xds turns the mesh model into the Envoy resources one sidecar proxy receives:
// listeners, clusters, route configurations and endpoints, named and shaped as Istio
// names and shapes them, so that what a learner sees in meshlab is what they will see in
// a real cluster.
//
// Generation is a pure function of a *model.Model and the proxy's *model.Pod: no I/O,
// no clocks, no randomness, and every result slice is sorted by resource name. The
// discovery server wraps the result in a snapshot; tests pin it with golden files.
//
// One file per resource type: listeners.go, clusters.go, routes.go, endpoints.go, with
// the naming rules in names.go and the shared proto helpers in proto.go. Istio's
// networking API shapes them as istiod does: httproute.go translates VirtualService http
// routes, trafficpolicy.go applies DestinationRule traffic policies, serviceentry.go
// turns ServiceEntry hosts into service ports, and hosts.go finds the objects that apply
// to a host. A model without Istio objects generates what it did before they existed.
package xds

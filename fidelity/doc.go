// Package fidelity holds meshlab up to real Istio. It is a test-only Go module, so that
// istio.io/istio never enters the meshlab binary's go.mod.
//
// For every shipped scenario it runs istiod's real config generator (istio.io/istio's
// pilot/test/xds fake discovery server, a real DiscoveryServer over a fake Kubernetes
// client) with the lab's Services, pods, EndpointSlices and Istio objects, and:
//
//   - connects a real `meshlab proxy` per sidecar pod to it over ADS, through a relay
//     that records what istiod sent and what the proxy ACKed or NACKed, and counts per
//     type how many of istiod's resources the sidecar accepted and refused, with the
//     refusal reasons (accept.go);
//   - diffs meshlab's own generator (controlplane/xds) against istiod's resources for the
//     same proxy, by type, resource name and field path (diff.go);
//   - holds both to checked-in lists of known differences and refusals
//     (testdata/known/<scenario>.txt), a ratchet: a new entry fails the test, an entry that
//     disappeared must be removed (known.go).
//
// One job per file: kube.go turns a meshlab model into istiod's inputs, oracle.go starts
// the fake istiod, relay.go records an ADS stream, sidecar.go runs a meshlab proxy,
// accept.go judges what it accepted, meshlab.go runs meshlab's generator, diff.go
// compares resources, known.go keeps the ratchet, report.go prints the tables.
//
// Ambient (run with PILOT_ENABLE_AMBIENT=true, see docs/FIDELITY.md): ambient.go serves a
// scenario from istiod's ambient index and collects its WDS as a ztunnel, ambient_meshlab.go
// runs meshlab's WDS generator, ambient_accept.go feeds istiod's WDS to meshlab's ztunnel
// client and state, ambient_report.go prints the tables; protocompat.go compares
// meshlab's ambientapi descriptors with Istio's. Waypoints (the same run): waypoint.go
// serves a waypoint scenario's Gateway, pod and Service to istiod, collects what istiod
// generates for the waypoint's proxy and runs meshlab's waypoint generator;
// waypoint_test.go diffs them and feeds istiod's configuration to a meshlab proxy running
// as the waypoint.
package fidelity

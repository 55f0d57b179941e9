// Package ambientapi holds Istio's ambient wire schemas as meshlab speaks them: WDS's
// istio.workload.Address (workload/), the L4 policy istio.security.Authorization
// (security/) and istio-cni's ZDS (zds/). The .proto files are meshlab's own with the
// field numbers on the wire; the .pb.go files are generated from them by generate.sh.
package ambientapi

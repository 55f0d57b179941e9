package lab

import (
	"fmt"

	"github.com/meshlab/meshlab/controlplane/model"
)

// refuseProxyless refuses a model with a pod injected with Istio's grpc-agent template:
// the control plane generates its proxyless gRPC resources (controlplane/xds/grpc.go), but
// the lab cannot run such a pod yet (the agent has no proxyless mode: no certificate
// files, bootstrap or xDS socket for the app), and starting it as a sidecar pod would
// give its proxy gRPC resources it cannot use. Said plainly rather than half done.
func refuseProxyless(m *model.Model) error {
	for _, p := range m.Pods {
		if p.Sidecar.GRPCAgent {
			return fmt.Errorf("%s: pod %s/%s: metadata.annotations: inject.istio.io/templates: grpc-agent (proxyless gRPC) is not run by the lab yet; remove the annotation to run the pod with a sidecar",
				p.Origin, p.Namespace, p.Name)
		}
	}
	return nil
}

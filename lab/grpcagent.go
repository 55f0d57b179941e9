package lab

import (
	"github.com/meshlab/meshlab/dataplane/agent"
	"github.com/meshlab/meshlab/netns"
)

// A pod injected with Istio's grpc-agent template (model.SidecarSpec.GRPCAgent) is run as
// Istio runs it: its agent starts no proxy and the pod captures nothing (captures), the
// agent writes the gRPC bootstrap and the certificate files and relays xDS on a socket
// (dataplane/agent/proxyless.go), and the app starts once the agent is ready (Istio's
// template holds it with `pilot-agent wait`: grpc-go reads the bootstrap at start).

// proxylessSandbox shares the pod's istio-xds and istio-data directories (Istio's two
// emptyDir volumes mounted into the app's container) with its app, at their own paths
// so that the bootstrap's paths hold in the app's view too, and names the bootstrap in
// GRPC_XDS_BOOTSTRAP, as the template sets it. The rest of the run root stays hidden:
// other pods' files and the lab's sockets.
func proxylessSandbox(sb *netns.Sandbox, podDir string) {
	for _, dir := range []string{agent.GRPCXDSDir(podDir), agent.GRPCCertDir(podDir)} {
		sb.Binds = append(sb.Binds, netns.Bind{Src: dir, Dst: dir})
	}
	sb.Env = append(sb.Env, agent.GRPCBootstrapEnv+"="+agent.GRPCBootstrapPath(podDir))
}

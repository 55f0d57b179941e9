package lab

import "github.com/meshlab/meshlab/dataplane/agent/agentapi"

// agentClient is a client of pod's agent over its agent.sock: the lab process lives
// outside the pod's namespace, the socket bridges the two. The caller closes it.
func (l *Lab) agentClient(pod string) *agentapi.Client {
	return agentapi.NewClient(l.paths.AgentSocket(pod))
}

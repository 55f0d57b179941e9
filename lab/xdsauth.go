package lab

import (
	"context"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshlab/meshlab/controlplane/discovery"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/netns"
)

// ParseXDSListen checks an --xds-listen address: a loopback IP and a port. The TCP xDS
// listener serves only callers holding a pod's token, but nothing in a lab needs it
// reachable from elsewhere.
func ParseXDSListen(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return ap, fmt.Errorf("--xds-listen %q: want ip:port, e.g. 127.0.0.1:15010: %w", s, err)
	}
	if !ap.Addr().IsLoopback() {
		return ap, fmt.Errorf("--xds-listen %q: the xDS listener serves on a loopback address only", s)
	}
	return ap, nil
}

// proxyAuthorizer returns the discovery server's Authorizer: a stream may speak only for
// the proxy of the pod its connection comes from, as istiod binds a proxy's node to the
// identity in its token. On xds.sock that is the network namespace of the process that
// connected (every pod has its own, and every proxy runs as the same uid 1337, so the uid
// alone would let one pod's proxy claim another's node id); on TCP it is the pod's CA
// token, sent as istiod's bearer token ("authorization: Bearer <token>").
func (l *Lab) proxyAuthorizer(nodes proxyNodes) discovery.Authorizer {
	return func(ctx context.Context, nodeID string) error { return l.authorizeProxy(ctx, nodes, nodeID) }
}

func (l *Lab) authorizeProxy(ctx context.Context, nodes proxyNodes, nodeID string) error {
	pod := nodes[nodeID]
	if pod == nil {
		return status.Errorf(codes.PermissionDenied, "node id %q is not the node id of any pod of lab %s", nodeID, l.opts.Name)
	}
	if pc, ok := discovery.PeerCredFromContext(ctx); ok {
		return l.authorizeUnixPeer(pc, pod)
	}
	tok := discovery.BearerToken(ctx)
	if tok == "" {
		return status.Error(codes.Unauthenticated, "xds over TCP needs the pod's token as \"authorization: Bearer <token>\" metadata")
	}
	caller, ok := l.ca.tokens.Lookup(tok)
	if !ok {
		return status.Error(codes.Unauthenticated, "unknown bearer token")
	}
	if caller.Pod != pod.Name || caller.Identity.Namespace != pod.Namespace {
		return status.Errorf(codes.PermissionDenied, "the token of pod %s/%s may not speak for node id %q", caller.Identity.Namespace, caller.Pod, nodeID)
	}
	return nil
}

// authorizeUnixPeer accepts a unix socket peer whose network namespace is pod's.
func (l *Lab) authorizeUnixPeer(pc discovery.PeerCred, pod *model.Pod) error {
	ns := NamespaceName(l.opts.Name, pod.Name)
	var want unix.Stat_t
	if err := unix.Stat(netns.Path(ns), &want); err != nil {
		return status.Errorf(codes.PermissionDenied, "pod %s/%s has no network namespace: %v", pod.Namespace, pod.Name, err)
	}
	if pc.NetNSIno == 0 || pc.NetNSIno != want.Ino || pc.NetNSDev != want.Dev {
		return status.Errorf(codes.PermissionDenied, "pid %d (uid %d) is not in the network namespace of pod %s/%s", pc.PID, pc.UID, pod.Namespace, pod.Name)
	}
	return nil
}

// EventXDSRefused reports an xDS stream the control plane refused: a process that is not
// the proxy of the pod whose node id it claimed (Fields: node, reason).
const EventXDSRefused = "xds.refused"

// publishXDSRefused is the discovery server's OnRefused.
func (l *Lab) publishXDSRefused(nodeID string, err error) {
	reason := status.Convert(err).Message()
	l.publish(EventXDSRefused, "", "xds stream refused for node "+nodeID+": "+reason, map[string]any{"node": nodeID, "reason": reason})
}

// proxyNodes maps the node id of every injected pod's proxy to its pod. Apply never adds,
// removes or renames pods, nor changes their addresses (sameTopology), so the map made at
// start holds for the lab's life; reading it takes no lock, which matters because the lab
// holds l.mu while it waits for proxies (a new epoch after a settings change) whose
// streams this authorizes.
type proxyNodes map[string]*model.Pod

func newProxyNodes(m *model.Model) proxyNodes {
	n := proxyNodes{}
	for _, p := range m.Pods {
		if p.Sidecar.Inject {
			n[p.NodeID()] = p
		}
	}
	return n
}

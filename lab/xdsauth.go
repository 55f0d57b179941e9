package lab

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"net/url"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshlab/meshlab/controlplane/ca"
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
// token, sent as istiod's bearer token ("authorization: Bearer <token>"), or its workload
// certificate, presented over TLS.
// nodes are the proxies of the lab's pods when it starts; setProxyNodes changes them as
// apply adds and removes pods.
func (l *Lab) proxyAuthorizer(nodes proxyNodes) discovery.Authorizer {
	l.live.nodes.Store(&nodes)
	return func(ctx context.Context, nodeID string) error {
		return l.authorizeProxy(ctx, *l.live.nodes.Load(), nodeID)
	}
}

// setProxyNodes makes the proxies of m's pods the ones the control plane serves.
func (l *Lab) setProxyNodes(m *model.Model) {
	n := newProxyNodes(m)
	l.live.nodes.Store(&n)
}

func (l *Lab) authorizeProxy(ctx context.Context, nodes proxyNodes, nodeID string) error {
	if discovery.IsZtunnel(nodeID) {
		// ztunnel runs in no pod of the model: its own token (ca.Tokens.IssueZtunnel),
		// on xds.sock too, makes it a ztunnel node, as istiod authenticates ztunnel's
		// service account token.
		caller, ok := l.ca.Tokens().Lookup(discovery.BearerToken(ctx))
		if !ok || caller.Identity != ca.ZtunnelIdentity {
			return status.Errorf(codes.PermissionDenied, "node id %q is a ztunnel's: it needs ztunnel's token (identity %s/%s) as \"authorization: Bearer <token>\"",
				nodeID, ca.ZtunnelIdentity.Namespace, ca.ZtunnelIdentity.ServiceAccount)
		}
		return nil
	}
	pod := nodes[nodeID]
	if pod == nil {
		return status.Errorf(codes.PermissionDenied, "node id %q is not the node id of any pod of lab %s", nodeID, l.opts.Name)
	}
	if pc, ok := discovery.PeerCredFromContext(ctx); ok {
		return l.authorizeUnixPeer(pc, pod)
	}
	if c := discovery.PeerCertificate(ctx); c != nil {
		// As istiod: the certificate's identity must be the pod's service account (the
		// replicas of one workload share it).
		// istiod compares the namespace and service account, not the trust domain: a
		// proxy keeps its certificate across a trust domain migration.
		want := ca.Identity{Namespace: pod.Namespace, ServiceAccount: pod.ServiceAccount}
		var got ca.Identity
		if len(c.URIs) == 1 {
			got, _, _ = ca.ParseSPIFFEID(c.URIs[0].String())
		}
		if got != want {
			return status.Errorf(codes.PermissionDenied, "the client certificate %s is not the identity %s of pod %s/%s", describeURIs(c.URIs), want.SPIFFEID(l.ca.Authority().TrustDomain()), pod.Namespace, pod.Name)
		}
		return nil
	}
	tok := discovery.BearerToken(ctx)
	if tok == "" {
		return status.Error(codes.Unauthenticated, "xds over TCP needs the pod's token as \"authorization: Bearer <token>\" metadata, or its workload certificate over TLS")
	}
	caller, ok := l.ca.Tokens().Lookup(tok)
	if !ok {
		return status.Error(codes.Unauthenticated, "unknown bearer token")
	}
	if caller.Pod != pod.Key() || caller.Identity.Namespace != pod.Namespace {
		return status.Errorf(codes.PermissionDenied, "the token of pod %s (namespace %s) may not speak for node id %q", caller.Pod, caller.Identity.Namespace, nodeID)
	}
	return nil
}

// authorizeUnixPeer accepts a unix socket peer whose network namespace is pod's.
func (l *Lab) authorizeUnixPeer(pc discovery.PeerCred, pod *model.Pod) error {
	ns := NamespaceName(l.opts.Name, pod.Key())
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

// describeURIs renders a certificate's URI SANs.
func describeURIs(us []*url.URL) string {
	if len(us) == 0 {
		return "(no URI SAN)"
	}
	var b bytes.Buffer
	for i, u := range us {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(u.String())
	}
	return b.String()
}

// proxyNodes maps the node id of every injected pod's proxy to its pod. A map is never
// changed once made: apply, adding or removing pods, stores a new one (setProxyNodes),
// so reading it takes no lock, which matters because the lab holds l.mu while it waits
// for proxies (a new epoch after a settings change) whose streams this authorizes.
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

// istiodIdentity is the identity of the lab's control plane in the certificates it
// serves on TCP, as istiod's.
var istiodIdentity = ca.Identity{Namespace: "istio-system", ServiceAccount: "istiod"}

// xdsTLS is the TLS config of the TCP xDS listener. Every handshake gets a new server
// certificate for istiodIdentity from the lab's CA and the CA's current trust bundle to
// verify client certificates, so a root rotation is followed at once; a TCP connection
// is rare (debugging tools), and signing costs about a millisecond.
func (l *Lab) xdsTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, roots, err := l.istiodCertificate()
			if err != nil {
				l.log.Error("xds tls: no server certificate", "err", err)
				return nil, err
			}
			return &tls.Config{
				MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"},
				ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: roots,
			}, nil
		},
	}
}

// istiodCertificate signs a certificate for istiodIdentity and returns it with the trust
// bundle's roots.
func (l *Lab) istiodCertificate() (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("generate key: %w", err)
	}
	u, err := url.Parse(istiodIdentity.SPIFFEID(l.ca.Authority().TrustDomain()))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("create csr: %w", err)
	}
	chain, err := l.ca.Authority().Sign(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr}), istiodIdentity, time.Hour)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert := tls.Certificate{PrivateKey: key}
	roots := x509.NewCertPool()
	for _, p := range chain {
		b, _ := pem.Decode([]byte(p))
		if b == nil {
			return tls.Certificate{}, nil, fmt.Errorf("sign istiod certificate: a chain entry is not PEM")
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("sign istiod certificate: %w", err)
		}
		if c.IsCA && bytes.Equal(c.RawIssuer, c.RawSubject) {
			roots.AddCert(c) // a self-signed root of the bundle
			continue
		}
		cert.Certificate = append(cert.Certificate, b.Bytes)
	}
	return cert, roots, nil
}

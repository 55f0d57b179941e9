package ambient

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/meshlab/meshlab/netns"
)

// The lab's ztunnel is a pod as Istio's DaemonSet makes one per node (a lab is one node):
// ztunnel-<suffix> in istio-system, service account ztunnel, in a network namespace of its
// own with an address on the node's bridge. It runs `meshlab ztunnel` as root (it enters
// pods' namespaces and marks its sockets), supervised by the lab, which restarts it when
// it dies; the node agent starts it when the lab first has an ambient pod, so a lab of
// sidecars alone runs no ztunnel.
const (
	ZtunnelNamespace      = "istio-system"
	ZtunnelServiceAccount = "ztunnel"
	// ZtunnelAdminAddr is ztunnel's admin listener inside its namespace.
	ZtunnelAdminAddr = "127.0.0.1:15000"
	// ZtunnelMetricsAddr reaches ztunnel's metrics listener (:15020, /stats/prometheus)
	// inside its namespace.
	ZtunnelMetricsAddr = "127.0.0.1:15020"
)

// ZtunnelPodName is the name of lab's ztunnel pod: ztunnel-<5 characters>, as a
// DaemonSet's pods are named, the same for a lab of that name every time.
func ZtunnelPodName(lab string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789" // the letters Kubernetes' name generator uses
	h := fnv.New64a()
	h.Write([]byte(lab))
	n := h.Sum64()
	var b strings.Builder
	for range 5 {
		b.WriteByte(alphabet[n%uint64(len(alphabet))])
		n /= uint64(len(alphabet))
	}
	return "ztunnel-" + b.String()
}

// ZtunnelIP is the address of the ztunnel pod: the last host address of the pod range,
// which the lab's allocator, counting up from the start of the range, does not reach
// (a lab holds at most 1023 pods).
func ZtunnelIP(podCIDR netip.Prefix) netip.Addr {
	p := podCIDR.Masked()
	a := p.Addr().As4()
	n := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n |= 1<<(32-p.Bits()) - 1 // broadcast
	n--
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// ZtunnelConfig is what the lab tells its ztunnel, through the environment variables real
// ztunnel reads (and meshlab's names for the two files real ztunnel reads at fixed paths).
type ZtunnelConfig struct {
	Socket         string // required: the ZDS socket (INPOD_UDS)
	XDSAddress     string // required: unix:///run/meshlab/<lab>/xds.sock (XDS_ADDRESS and CA_ADDRESS)
	NodeName       string // required: ml-<lab>-node (NODE_NAME)
	PodName        string // required: ZtunnelPodName (POD_NAME)
	InstanceIP     netip.Addr
	TrustDomain    string // required
	TokenFile      string // required: its CA token (MESHLAB_TOKEN_FILE)
	RootCert       string // required: the mesh's root certificate (MESHLAB_ROOT_CERT)
	LogLevel       string // optional: RUST_LOG's level, "info"
	ClusterID      string // optional: "Kubernetes"
	ServiceAccount string // optional: ZtunnelServiceAccount
}

// Env is c as ztunnel's environment.
func (c ZtunnelConfig) Env() []string {
	or := func(v, d string) string {
		if v == "" {
			return d
		}
		return v
	}
	return []string{
		"INPOD_UDS=" + c.Socket,
		"XDS_ADDRESS=" + c.XDSAddress,
		"CA_ADDRESS=" + c.XDSAddress,
		"NODE_NAME=" + c.NodeName,
		"POD_NAME=" + c.PodName,
		"POD_NAMESPACE=" + ZtunnelNamespace,
		"INSTANCE_IP=" + c.InstanceIP.String(),
		"CLUSTER_ID=" + or(c.ClusterID, "Kubernetes"),
		"TRUST_DOMAIN=" + c.TrustDomain,
		"SERVICE_ACCOUNT=" + or(c.ServiceAccount, ZtunnelServiceAccount),
		"MESHLAB_TOKEN_FILE=" + c.TokenFile,
		"MESHLAB_ROOT_CERT=" + c.RootCert,
		"RUST_LOG=" + or(c.LogLevel, "info"),
	}
}

// AdminGet GETs path (with its query) from ztunnel's admin, 127.0.0.1:15000 inside
// ztunnel's network namespace ns, as the lab reaches a pod's Envoy admin from inside the
// pod: the answer's body when the status is 200, else an error with the start of it.
// The caller closes the body.
func AdminGet(ctx context.Context, ns, path string) (io.ReadCloser, error) {
	return get(ctx, ns, ZtunnelAdminAddr, "admin", path)
}

// MetricsGet GETs path from ztunnel's metrics listener (15020) inside its network
// namespace ns, as AdminGet does its admin.
func MetricsGet(ctx context.Context, ns, path string) (io.ReadCloser, error) {
	return get(ctx, ns, ZtunnelMetricsAddr, "metrics", path)
}

// get GETs path from addr inside ns; what names the listener in errors.
func get(ctx context.Context, ns, addr, what, path string) (io.ReadCloser, error) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return netns.DialContext(ctx, ns, network, addr)
		},
		DisableKeepAlives:     true,
		ResponseHeaderTimeout: 10 * time.Second,
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("get %s from ztunnel's %s: %w", path, what, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("get %s from ztunnel's %s: %s: %s", path, what, resp.Status, strings.TrimSpace(string(body)))
	}
	return resp.Body, nil
}

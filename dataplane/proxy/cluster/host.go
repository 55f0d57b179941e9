package cluster

import (
	"net/netip"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
)

// Host is one upstream endpoint: a TCP address, a unix socket path or an internal
// listener of this proxy.
type Host struct {
	Addr     netip.AddrPort    // valid for socket addresses
	Pipe     string            // set for pipe (unix socket) addresses
	Internal internalconn.Addr // set (Listener not empty) for envoy_internal_address
	// Metadata is an internal host's metadata, whose filter_metadata the
	// internal_upstream transport socket passes through; nil for other hosts (a pointer
	// keeps Host comparable).
	Metadata *corev3.Metadata
	Healthy  bool
	// SocketMatch is the endpoint's filter_metadata["envoy.transport_socket_match"] as
	// canonical JSON; "" without one.
	SocketMatch string
	// Workload is the endpoint's istio metadata "workload" (istiod's telemetry
	// encoding "name;namespace;canonical-name;revision;cluster"), "" without one.
	Workload string
}

// String returns the host as Envoy prints it: "10.0.0.1:8080" or "unix://path".
func (h Host) String() string {
	if h.Internal.Listener != "" {
		return h.Internal.String()
	}
	if h.Pipe != "" {
		return "unix://" + h.Pipe
	}
	return h.Addr.String()
}

// Network returns the dial network of the host.
func (h Host) Network() string {
	if h.Internal.Listener != "" {
		return internalconn.Network
	}
	if h.Pipe != "" {
		return "unix"
	}
	return "tcp"
}

// DialAddr returns the address to dial.
func (h Host) DialAddr() string {
	if h.Pipe != "" {
		return h.Pipe
	}
	return h.Addr.String()
}

// hostKey identifies a host as its String does, without building the string: the pipe
// path for a pipe, else the socket address.
type hostKey struct {
	addr     netip.AddrPort
	pipe     string
	internal internalconn.Addr
}

func (h Host) key() hostKey {
	if h.Internal.Listener != "" {
		return hostKey{internal: h.Internal}
	}
	if h.Pipe != "" {
		return hostKey{pipe: h.Pipe}
	}
	return hostKey{addr: h.Addr}
}

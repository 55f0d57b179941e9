package cluster

import "net/netip"

// Host is one upstream endpoint: a TCP address or a unix socket path.
type Host struct {
	Addr    netip.AddrPort // valid for socket addresses
	Pipe    string         // set for pipe (unix socket) addresses
	Healthy bool
	// SocketMatch is the endpoint's filter_metadata["envoy.transport_socket_match"] as
	// canonical JSON; "" without one.
	SocketMatch string
	// Workload is the endpoint's istio metadata "workload" (istiod's telemetry
	// encoding "name;namespace;canonical-name;revision;cluster"), "" without one.
	Workload string
}

// String returns the host as Envoy prints it: "10.0.0.1:8080" or "unix://path".
func (h Host) String() string {
	if h.Pipe != "" {
		return "unix://" + h.Pipe
	}
	return h.Addr.String()
}

// Network returns the dial network of the host.
func (h Host) Network() string {
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
	addr netip.AddrPort
	pipe string
}

func (h Host) key() hostKey {
	if h.Pipe != "" {
		return hostKey{pipe: h.Pipe}
	}
	return hostKey{addr: h.Addr}
}

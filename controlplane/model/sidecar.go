package model

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// SidecarEndpoint is a Sidecar ingress listener's defaultEndpoint: where the sidecar
// delivers what it accepts on the listener's port.
type SidecarEndpoint struct {
	// Localhost reports 127.0.0.1 (or ::1); else the pod's own IP (0.0.0.0, ::), as
	// istiod reads them.
	Localhost bool
	Port      uint16
}

// ParseSidecarEndpoint reads a defaultEndpoint as istiod's validation does:
// 127.0.0.1:PORT or [::1]:PORT (the app on localhost), 0.0.0.0:PORT or [::]:PORT (the
// app on the pod's IP). A unix:// endpoint is refused: a lab's apps listen on TCP.
func ParseSidecarEndpoint(s string) (SidecarEndpoint, error) {
	if strings.HasPrefix(s, "unix://") {
		return SidecarEndpoint{}, fmt.Errorf("%q: meshlab's apps listen on TCP, not a unix socket: give 127.0.0.1:PORT or 0.0.0.0:PORT", s)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return SidecarEndpoint{}, err
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return SidecarEndpoint{}, fmt.Errorf("sidecar: defaultEndpoint port (%s) is not a number: %w", port, err)
	}
	if n < 1 || n > 65535 {
		return SidecarEndpoint{}, fmt.Errorf("port number %d must be in the range 1..65535", n)
	}
	switch host {
	case "127.0.0.1", "::1":
		return SidecarEndpoint{Localhost: true, Port: uint16(n)}, nil
	case "0.0.0.0", "::":
		return SidecarEndpoint{Port: uint16(n)}, nil
	}
	return SidecarEndpoint{}, fmt.Errorf("sidecar: defaultEndpoint must be of form 127.0.0.1:<port>,0.0.0.0:<port>,[::1]:port,[::]:port,unix://filepath or unset")
}

// ParseProtocol maps an Istio protocol name (case-insensitive) to meshlab's protocols.
func ParseProtocol(s string) (Protocol, bool) {
	switch strings.ToLower(s) {
	case "http":
		return ProtocolHTTP, true
	case "http2", "h2c", "kubernetes.io/h2c":
		return ProtocolHTTP2, true
	case "grpc", "grpc-web":
		return ProtocolGRPC, true
	case "tls":
		return ProtocolTLS, true
	case "https":
		return ProtocolHTTPS, true
	case "tcp", "mongo", "mysql", "redis", "thrift":
		return ProtocolTCP, true
	}
	return 0, false
}

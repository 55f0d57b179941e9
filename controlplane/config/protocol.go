package config

import (
	"strings"

	"github.com/meshlab/meshlab/controlplane/model"
)

// protocolFor chooses a service port's protocol as Istio does (pkg/config/kube
// ConvertProtocol): the port's appProtocol when it names a known protocol, else the
// prefix of its name before the first '-' ("http-web" -> HTTP, "grpc" -> GRPC).
//
// A port neither names is ProtocolAuto, as istiod's protocol.Unsupported: the sidecars
// sniff it (HTTP to a connection manager, anything else as TCP). Protocols Istio treats
// as opaque bytes (tcp, mongo, mysql, redis...) are TCP; tls and https are opaque too
// but routed by SNI (model.Protocol.IsTLS).
func protocolFor(name string, appProtocol *string) model.Protocol {
	if appProtocol != nil {
		if p, ok := parseProtocol(*appProtocol); ok {
			return p
		}
	}
	prefix, _, _ := strings.Cut(name, "-")
	if p, ok := parseProtocol(prefix); ok {
		return p
	}
	return model.ProtocolAuto
}

// parseProtocol maps an Istio protocol name (case-insensitive) to meshlab's protocols
// (model.ParseProtocol).
func parseProtocol(s string) (model.Protocol, bool) { return model.ParseProtocol(s) }

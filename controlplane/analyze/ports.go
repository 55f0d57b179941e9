package analyze

import (
	"fmt"
	"strings"
)

// istioProtocols are the protocol names Istio recognises as a port name prefix or an
// appProtocol (lowercase).
var istioProtocols = map[string]bool{
	"http": true, "http2": true, "https": true, "http_proxy": true, "grpc": true, "grpc-web": true,
	"tcp": true, "tls": true, "udp": true, "mongo": true, "mysql": true, "redis": true, "thrift": true,
	"h2c": true, "kubernetes.io/h2c": true,
}

// checkPorts reports Service ports Istio cannot classify by name (IST0118) and ports
// whose appProtocol contradicts their name.
func checkPorts(objs []*object) []Finding {
	var fs []Finding
	for _, o := range objs {
		if o.svc == nil {
			continue
		}
		for i, p := range o.svc.Spec.Ports {
			field := fmt.Sprintf("spec.ports[%d]", i)
			prefix, _, _ := strings.Cut(strings.ToLower(p.Name), "-")
			named := istioProtocols[prefix] || (prefix == "grpc" && strings.HasPrefix(strings.ToLower(p.Name), "grpc-web"))
			if p.AppProtocol != nil {
				ap := strings.ToLower(*p.AppProtocol)
				if !istioProtocols[ap] {
					fs = append(fs, o.finding(Warning, CodeAppProtocolNameMismatch, field+".appProtocol",
						fmt.Sprintf("appProtocol %q is not a protocol Istio knows; the port is treated as %s.", *p.AppProtocol, fallback(named, prefix))))
				} else if named && prefix != ap {
					fs = append(fs, o.finding(Warning, CodeAppProtocolNameMismatch, field+".appProtocol",
						fmt.Sprintf("appProtocol %q contradicts the port name %q; Istio uses the appProtocol.", *p.AppProtocol, p.Name)))
				}
				if istioProtocols[ap] {
					continue // classified by appProtocol whatever the name
				}
			}
			if !named {
				fs = append(fs, o.finding(Info, CodePortNameNotUnderConvention, field+".name",
					fmt.Sprintf("Port name %s (port: %d, targetPort: %s) doesn't follow the naming convention of Istio port.",
						p.Name, p.Port, p.TargetPort.String())))
			}
		}
	}
	return fs
}

func fallback(named bool, prefix string) string {
	if named {
		return "its name prefix " + prefix
	}
	return "HTTP (meshlab does not sniff)"
}

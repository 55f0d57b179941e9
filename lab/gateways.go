package lab

import (
	"fmt"
	"io"
	"slices"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Gateway pods (model.Pod.Router) are what `istioctl install --set profile=demo` runs in
// istio-system: the agent and proxy as a standalone gateway (node type router), with
// no app and no capture rules, so traffic reaches the proxy's listeners on the ports
// its Gateways declare (8080, 8443) directly. They resolve cluster DNS as every pod
// does without a sidecar's DNS capture.

// captures reports whether the pod's traffic is captured to a sidecar.
func captures(p *model.Pod) bool { return p.Sidecar.Inject && !p.Router && !p.Sidecar.GRPCAgent }

// printGatewayURL tells how the host reaches the lab's ingress gateways, as Istio's
// ingress task computes GATEWAY_URL: with `meshlab port-forward` (kubectl's
// port-forward) on 127.0.0.1, since nothing in a lab is routed from the host. Besides
// istio-ingressgateway, each Gateway API Gateway's automated deployment
// ("<gateway>-istio", selecting gateway.networking.k8s.io/gateway-name) is listed with
// its first listener port, each on a local port of its own.
func printGatewayURL(w io.Writer, lab string, m *model.Model) {
	local := 8080
	i := slices.IndexFunc(m.Services, func(s *model.Service) bool {
		return s.Name == model.IngressGatewayName && s.Namespace == "istio-system"
	})
	if i >= 0 {
		fmt.Fprintf(w, "ingress gateway: meshlab port-forward --name %s -n istio-system svc/%s %d:80 &\n", lab, model.IngressGatewayName, local)
		fmt.Fprintf(w, "  then export GATEWAY_URL=127.0.0.1:%d (INGRESS_HOST=127.0.0.1, INGRESS_PORT=%d)\n", local, local)
		local++
	}
	for _, s := range m.Services {
		gw := s.Selector[model.GatewayAPINameLabel]
		if gw == "" || len(s.Ports) < 2 {
			continue
		}
		port := s.Ports[1].Port // after the status port
		fmt.Fprintf(w, "Gateway %s/%s: meshlab port-forward --name %s -n %s svc/%s %d:%d &\n", s.Namespace, gw, lab, s.Namespace, s.Name, local, port)
		fmt.Fprintf(w, "  then export GATEWAY_URL=127.0.0.1:%d\n", local)
		local++
	}
}

package main

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
)

// The lab computes the view (lab/describeservice_test.go); the CLI prints it.
func TestPrintServiceView(t *testing.T) {
	t.Parallel()
	v := api.ServiceView{
		Name: "backend", Namespace: "default", Hostname: "backend.default.svc.cluster.local", VIP: "10.96.0.10",
		Selector: map[string]string{"app": "backend"},
		Ports: []api.ServicePortView{
			{Name: "http", Port: 8080, TargetPort: 8080, Protocol: "HTTP", MTLS: "STRICT"},
			{Name: "tcp-db", Port: 9000, TargetPort: 9001, Protocol: "TCP", MTLS: "PERMISSIVE"},
		},
		Pods:                  []api.ServicePodView{{Name: "backend-v1", IP: netip.MustParseAddr("10.244.0.3"), Ready: true}},
		Endpoints:             []api.EndpointView{{Cluster: "outbound|8080||backend.default.svc.cluster.local", Address: "10.244.0.3:8080", Health: "healthy"}},
		EndpointsFrom:         "frontend",
		VirtualServices:       []string{"default/backend"},
		DestinationRules:      map[string][]string{"default/backend": {"v1"}},
		PeerAuthentications:   []string{"default/default", "default/db"},
		AuthorizationPolicies: []string{"default/allow-frontend (ALLOW)"},
	}
	var b bytes.Buffer
	if err := printServiceView(&b, v); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "describe-service", b.Bytes())
}

package main

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
)

func obj(t *testing.T, kind, name, js string) api.ConfigObject {
	t.Helper()
	if !json.Valid([]byte(js)) {
		t.Fatalf("bad JSON for %s %s", kind, name)
	}
	return api.ConfigObject{Kind: kind, Namespace: "default", Name: name, File: "s.yaml", Object: json.RawMessage(js)}
}

func TestBuildServiceView(t *testing.T) {
	objs := []api.ConfigObject{
		obj(t, "Service", "backend", `{"spec":{"selector":{"app":"backend"},"ports":[{"name":"http","port":8080},{"name":"tcp-db","port":9000,"targetPort":9001}]}}`),
		obj(t, "Workload", "backend-v1", `{"spec":{"labels":{"app":"backend","version":"v1"}}}`),
		obj(t, "Workload", "frontend", `{"spec":{"labels":{"app":"frontend"}}}`),
		obj(t, "VirtualService", "backend", `{"spec":{"hosts":["backend"],"http":[{"route":[{"destination":{"host":"backend","subset":"v1"}}]}]}}`),
		obj(t, "DestinationRule", "backend", `{"spec":{"host":"backend.default.svc.cluster.local","subsets":[{"name":"v1","labels":{"version":"v1"}}]}}`),
		obj(t, "PeerAuthentication", "default", `{"spec":{"mtls":{"mode":"STRICT"}}}`),
		obj(t, "PeerAuthentication", "db", `{"spec":{"selector":{"matchLabels":{"app":"backend"}},"portLevelMtls":{"9001":{"mode":"PERMISSIVE"}}}}`),
		obj(t, "AuthorizationPolicy", "allow-frontend", `{"spec":{"selector":{"matchLabels":{"app":"backend"}},"action":"ALLOW"}}`),
	}
	pods := []api.PodStatus{
		{Name: "backend-v1", Namespace: "default", IP: netip.MustParseAddr("10.244.0.3"), Ready: true},
		{Name: "frontend", Namespace: "default", IP: netip.MustParseAddr("10.244.0.2"), Ready: true},
	}
	v, err := buildServiceView(objs, pods, "backend")
	if err != nil {
		t.Fatal(err)
	}
	v.VIP = "10.96.0.10"
	v.Endpoints = parseClusterHealth("outbound|8080||backend.default.svc.cluster.local::10.244.0.3:8080::health_flags::healthy\n"+
		"outbound|8080||backend.default.svc.cluster.local::10.244.0.3:8080::weight::1\n"+
		"outbound|8080||other.default.svc.cluster.local::10.244.0.9:8080::health_flags::healthy\n", v.Hostname)
	v.EndpointsFrom = "frontend"
	var b bytes.Buffer
	if err := printServiceView(&b, v); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "describe-service", b.Bytes())

	_, err = buildServiceView(objs, pods, "nope")
	if err == nil || !strings.Contains(err.Error(), "services: backend") {
		t.Errorf("unknown service: err = %v, want one listing the services", err)
	}
}

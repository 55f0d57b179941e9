package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
)

// proxy-status --istiod: a ztunnel is never sent Envoy's types, which istioctl shows
// IGNORED; a sidecar's unsent type stays NOT SENT.
func TestPrintIstiodProxyStatusZtunnel(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	err := printIstiodProxyStatus(&b, []istiodSyncStatus{
		{ProxyID: "curl-1.default", ClusterID: "Kubernetes", ProxyType: "sidecar", IstioVersion: "1.31",
			ClusterSent: "n1", ClusterAcked: "n1", ListenerSent: "n2", ListenerAcked: "n2", EndpointSent: "n3", EndpointAcked: "n3", RouteSent: "n4", RouteAcked: "n4"},
		{ProxyID: "ztunnel-abcde.istio-system", ClusterID: "Kubernetes", ProxyType: "ztunnel", IstioVersion: "1.31"},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`(?m)^curl-1\.default\s+Kubernetes(\s+SYNCED){4}\s+NOT SENT\s+meshlab-istiod\s+1\.31$`,
		`(?m)^ztunnel-abcde\.istio-system\s+Kubernetes(\s+IGNORED){5}\s+meshlab-istiod\s+1\.31$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("proxy-status --istiod:\n%s\nwant a line matching %s", out, want)
		}
	}
}

// history of the ztunnel pod: its columns are WDS and WADS.
func TestPrintHistoryZtunnel(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	h := api.PodHistory{Pod: "istio-system/ztunnel-abcde", NodeID: "ztunnel~10.244.255.254~ztunnel-abcde.istio-system~istio-system.svc.cluster.local",
		Snapshots: []api.HistorySnapshot{{Version: "v1", Time: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), Trigger: "start",
			Types: map[string]api.HistoryType{"WDS": {Resources: 9, State: "ACK"}, "WADS": {Resources: 1, State: "ACK"}}}}}
	if err := printHistory(&b, h); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "VERSION TIME WDS WADS TRIGGER" {
		t.Errorf("header %q; want VERSION TIME WDS WADS TRIGGER", lines[0])
	}
	if f := strings.Fields(lines[1]); strings.Join(f, " ") != "v1 09:00:00 ACK/9 ACK/1 start" {
		t.Errorf("row %q", lines[1])
	}
}

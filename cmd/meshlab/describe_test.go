package main

import (
	"bytes"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
)

func TestPrintPodDetail(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) time.Time { return now.Add(-d) }
	ptr := func(t time.Time) *time.Time { return &t }
	code := func(c int) *int { return &c }
	next := now.Add(400 * time.Millisecond)
	d := api.PodDetail{
		PodStatus: api.PodStatus{Name: "backend-v1", Namespace: "default", NetNS: "ml-demo-backend-v1",
			IP: netip.MustParseAddr("10.244.0.3"), Sidecar: true, Ready: true, Epoch: 1},
		Labels: map[string]string{"version": "v1", "app": "backend"}, ServiceAccount: "backend",
		Proxy: &api.AgentStatus{
			Ready: true, ProxyPath: "/usr/local/bin/meshlab", ProxyVersion: "meshlab proxy version: 1.0", DataPlane: "meshlab-proxy",
			Restarts: 2, ConsecutiveFailures: 1, NextRestartAt: &next,
			Cert: &api.WorkloadCert{SPIFFEID: "spiffe://cluster.local/ns/default/sa/backend", Serial: "3f2a9c",
				NotBefore: at(time.Hour), NotAfter: now.Add(23 * time.Hour), RotateAt: now.Add(18*time.Hour + 12*time.Minute), Rotations: 1},
			Settings: api.ProxySettings{LogLevel: "info", Concurrency: 2, DrainDuration: "45s", ParentShutdownDuration: "1m0s"},
			Epochs: []api.ProxyEpoch{
				{Epoch: 0, PID: 100, State: "live", Reason: "initial", StartedAt: at(time.Minute), ProxyVersion: "1.0"},
				{Epoch: 1, PID: 101, State: "exited", Reason: "restart", StartedAt: at(2 * time.Second), ExitedAt: ptr(at(time.Second)),
					ExitCode: code(1), ProxyVersion: "1.0", Error: "proxy epoch 1 exited: exit status 1\nmore"},
			},
			Message: "last unexpected proxy exit: proxy epoch 1 exited: exit status 1\ncannot bind 0.0.0.0:15090",
		},
	}
	var b bytes.Buffer
	if err := printPodDetail(&b, d, now); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "describe-pod", b.Bytes())

	b.Reset()
	if err := printPodDetail(&b, api.PodDetail{PodStatus: api.PodStatus{Name: "db", Ready: true}}, now); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "describe-pod-no-sidecar", b.Bytes())
}

// A proxyless gRPC pod shows its agent's files and relayed streams, not epochs.
func TestPrintPodDetailProxyless(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d := api.PodDetail{
		PodStatus: api.PodStatus{Name: "echo-v1", Namespace: "default", NetNS: "ml-demo-echo-v1",
			IP: netip.MustParseAddr("10.244.0.2"), Sidecar: true, Ready: true, Epoch: -1},
		Proxy: &api.AgentStatus{Ready: true, DataPlane: "proxyless-grpc",
			Cert: &api.WorkloadCert{SPIFFEID: "spiffe://cluster.local/ns/default/sa/echo", NotAfter: now.Add(time.Hour)},
			Proxyless: &api.ProxylessAgent{Bootstrap: "/run/meshlab/demo/pods/echo-v1/istio-xds/grpc-bootstrap.json",
				XDSSocket: "/run/meshlab/demo/pods/echo-v1/istio-xds/XDS", CertDir: "/run/meshlab/demo/pods/echo-v1/istio-data",
				Streams: []string{"sidecar~10.244.0.2~echo-v1.default~default.svc.cluster.local (sotw, 2 requests, 1 responses)"}, Relayed: 3,
				LastError: "node x: refused", LastErrorAt: now.Add(-time.Minute)},
		},
	}
	var b bytes.Buffer
	if err := printPodDetail(&b, d, now); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	flat := regexp.MustCompile(` +`).ReplaceAllString(got, " ") // tabwriter's padding
	for _, want := range []string{
		"Sidecar: none: proxyless gRPC (grpc-agent template); the agent runs no proxy\n",
		" Bootstrap: /run/meshlab/demo/pods/echo-v1/istio-xds/grpc-bootstrap.json (GRPC_XDS_BOOTSTRAP)\n",
		" XDS proxy: unix:///run/meshlab/demo/pods/echo-v1/istio-xds/XDS, relayed to the lab: 1 streams open, 3 since start\n",
		" stream: sidecar~10.244.0.2~echo-v1.default~default.svc.cluster.local (sotw, 2 requests, 1 responses)\n",
		" Last stream error: node x: refused (1m0s ago)\n",
		"spiffe://cluster.local/ns/default/sa/echo",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("describe lacks %q:\n%s", want, got)
		}
	}
	if bytes.Contains(b.Bytes(), []byte("Epochs:")) {
		t.Errorf("a proxyless pod has no epochs to show:\n%s", got)
	}
}

// The lab's ztunnel pod shows its node-proxy status, where its log is and how to read it.
func TestPrintPodDetailZtunnel(t *testing.T) {
	d := api.PodDetail{
		PodStatus: api.PodStatus{Name: "ztunnel-x2b9q", Namespace: "istio-system", NetNS: "ml-demo-ztunnel-x2b9q.istio-system",
			IP: netip.MustParseAddr("10.244.3.254"), Ready: true, Restarts: 1},
		Labels: map[string]string{"app": "ztunnel"}, ServiceAccount: "ztunnel", DataplaneMode: "none",
		Ztunnel: &api.ZtunnelPodStatus{Connected: true, Pods: 3, Restarts: 1, Log: "/run/meshlab/demo/ztunnel/ztunnel.log"},
	}
	var b bytes.Buffer
	if err := printPodDetail(&b, d, time.Now()); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "describe-pod-ztunnel", b.Bytes())
}

package config

import (
	"net/netip"
	"testing"
)

// A Workload can pin its pods' Envoy binary; the path reaches the model's sidecar spec.
func TestSidecarProxyPathPin(t *testing.T) {
	t.Parallel()
	s, err := Load("t.yaml", []byte(docs(service(okService), workload("backend", okWorkload+"  sidecar: {proxyPath: /opt/envoy-1.36/bin/envoy}\n"))))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Pods) != 1 || m.Pods[0].Sidecar.ProxyPath != "/opt/envoy-1.36/bin/envoy" || !m.Pods[0].Sidecar.Inject {
		t.Errorf("pods = %+v, want the pinned proxy path", m.Pods)
	}
}

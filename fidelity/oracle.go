package fidelity

import (
	"fmt"
	"net"
	"os"
	"testing"

	meshconfig "istio.io/api/mesh/v1alpha1"
	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pilot/test/xds"
	"istio.io/istio/pkg/config/mesh"
	istiolog "istio.io/istio/pkg/log"

	"github.com/meshlab/meshlab/controlplane/model"
)

// oracle is istiod's real generator serving one lab's objects over ADS on 127.0.0.1.
type oracle struct {
	fake *xds.FakeDiscoveryServer
	addr string // host:port of its ADS listener
}

// startOracle starts the fake istiod for m; it stops with the test.
func startOracle(t *testing.T, m *model.Model) (*oracle, error) {
	t.Helper()
	objs, err := kubeObjects(m)
	if err != nil {
		return nil, fmt.Errorf("convert kubernetes objects: %w", err)
	}
	cfgs, err := istioConfigs(m)
	if err != nil {
		return nil, fmt.Errorf("convert istio objects: %w", err)
	}
	// istiod's ENABLE_TLS_ON_SIDECAR_INGRESS, which the lab's install sets: read when
	// istiod builds an inbound listener, so set for this scenario's generation (the
	// scenarios run one at a time).
	features.EnableTLSOnSidecarIngress = m.Mesh.TLSOnSidecarIngress
	fake := xds.NewFakeDiscoveryServer(t, xds.FakeOptions{
		KubernetesObjectString: objs,
		ConfigString:           cfgs,
		MeshConfig:             meshConfig(m.Mesh),
		ListenerBuilder:        func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") },
	})
	return &oracle{fake: fake, addr: fake.Listener.Addr().String()}, nil
}

// meshConfig is Istio's default MeshConfig with the lab's mesh-wide settings.
func meshConfig(mc model.MeshConfig) *meshconfig.MeshConfig {
	m := mesh.DefaultMeshConfig()
	m.RootNamespace = mc.Root()
	m.OutboundTrafficPolicy = &meshconfig.MeshConfig_OutboundTrafficPolicy{Mode: meshconfig.MeshConfig_OutboundTrafficPolicy_ALLOW_ANY}
	if mc.OutboundTrafficPolicy == model.RegistryOnly {
		m.OutboundTrafficPolicy.Mode = meshconfig.MeshConfig_OutboundTrafficPolicy_REGISTRY_ONLY
	}
	m.AccessLogFile = mc.AccessLogPath()
	m.AccessLogFormat = mc.AccessLogFormat
	if mc.AccessLogEncoding == model.AccessLogJSON {
		m.AccessLogEncoding = meshconfig.MeshConfig_JSON
	}
	m.TrustDomain = mc.Domain()
	m.TrustDomainAliases = mc.TrustDomainAliases
	return m
}

// quietIstio turns istiod's logs off (the fake server logs errors about Gateway API CRDs it
// ignores), so that the tables stay readable; MESHLAB_FIDELITY_ISTIO_LOG=1 keeps its errors.
func quietIstio() {
	level := istiolog.NoneLevel
	if os.Getenv("MESHLAB_FIDELITY_ISTIO_LOG") == "1" {
		level = istiolog.ErrorLevel
	}
	for _, s := range istiolog.Scopes() {
		s.SetOutputLevel(level)
	}
}

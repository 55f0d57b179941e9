package xds

import (
	"testing"

	security "istio.io/api/security/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

func TestEffectiveMTLSMode(t *testing.T) {
	t.Parallel()
	const unset = security.PeerAuthentication_MutualTLS_UNSET
	ports := func(p uint32, m MTLSMode) map[uint32]MTLSMode { return map[uint32]MTLSMode{p: m} }
	db := map[string]string{"app": "db"}
	cases := []struct {
		name string
		pas  []*model.IstioConfig[*security.PeerAuthentication]
		root string
		pod  string
		port uint16
		want MTLSMode
	}{
		{name: "none", pod: "db-v1", port: 5432, want: MTLSPermissive},
		{name: "mesh", pas: P(pa("istio-system", "default", nil, MTLSStrict, nil)), pod: "db-v1", port: 5432, want: MTLSStrict},
		{name: "custom root", root: "mesh", pas: P(pa("istio-system", "default", nil, MTLSStrict, nil), pa("mesh", "default", nil, MTLSDisable, nil)), pod: "db-v1", port: 5432, want: MTLSDisable},
		{name: "namespace over mesh", pas: P(pa("default", "ns", nil, MTLSDisable, nil), pa("istio-system", "default", nil, MTLSStrict, nil)), pod: "db-v1", port: 5432, want: MTLSDisable},
		{name: "other namespace ignored", pas: P(pa("qa", "ns", nil, MTLSStrict, nil)), pod: "db-v1", port: 5432, want: MTLSPermissive},
		{name: "workload over namespace", pas: P(pa("default", "db", db, MTLSStrict, nil), pa("default", "ns", nil, MTLSDisable, nil)), pod: "db-v1", port: 5432, want: MTLSStrict},
		{name: "workload selector misses", pas: P(pa("default", "db", db, MTLSStrict, nil)), pod: "reviews-v1", port: 9080, want: MTLSPermissive},
		{name: "workload UNSET inherits namespace", pas: P(pa("default", "db", db, unset, nil), pa("default", "ns", nil, MTLSDisable, nil)), pod: "db-v1", port: 5432, want: MTLSDisable},
		{name: "port level", pas: P(pa("default", "db", db, MTLSStrict, ports(5432, MTLSDisable))), pod: "db-v1", port: 5432, want: MTLSDisable},
		{name: "port level other port", pas: P(pa("default", "db", db, MTLSStrict, ports(5433, MTLSDisable))), pod: "db-v1", port: 5432, want: MTLSStrict},
		{name: "port level UNSET inherits", pas: P(pa("default", "db", db, unset, ports(5432, unset)), pa("istio-system", "m", nil, MTLSStrict, nil)), pod: "db-v1", port: 5432, want: MTLSStrict},
		{name: "tie: first by name", pas: P(pa("default", "a", nil, MTLSDisable, nil), pa("default", "b", nil, MTLSStrict, nil)), pod: "db-v1", port: 5432, want: MTLSDisable},
		{name: "selector in root namespace is not mesh-wide", pas: P(pa("istio-system", "db", db, MTLSStrict, nil)), pod: "db-v1", port: 5432, want: MTLSPermissive},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := istioModel()
			m.Istio.PeerAuthentications = tc.pas
			m.Mesh.RootNamespace = tc.root
			if got := EffectiveMTLSMode(m, m.Pod(tc.pod), tc.port); got != tc.want {
				t.Errorf("EffectiveMTLSMode(%s, %d) = %v, want %v", tc.pod, tc.port, got, tc.want)
			}
		})
	}
}

// P lists PeerAuthentications.
func P(pas ...*model.IstioConfig[*security.PeerAuthentication]) []*model.IstioConfig[*security.PeerAuthentication] {
	return pas
}

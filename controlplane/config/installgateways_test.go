package config

import (
	"fmt"
	"slices"
	"testing"
)

// TestInstalledGatewaysStay: the gateways `meshlab install` turned on (its
// installed-state IstioOperator, kept on the MeshConfig) exist with no config selecting
// them, as on a cluster after istioctl install; without the install, only config brings
// them.
func TestInstalledGatewaysStay(t *testing.T) {
	t.Parallel()
	const mesh = `apiVersion: meshlab.dev/v1alpha1
kind: MeshConfig
metadata:
  name: mesh
  annotations:
    meshlab.dev/installed-state: '{"kind":"IstioOperator","spec":{"components":{"egressGateways":[{"enabled":%v,"name":"istio-egressgateway"}],"ingressGateways":[{"enabled":true,"name":"istio-ingressgateway"}]}}}'
spec: {}
`
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{fmt.Sprintf(mesh, true), []string{"istio-egressgateway", "istio-ingressgateway"}},
		{fmt.Sprintf(mesh, false), []string{"istio-ingressgateway"}},
		{"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: mesh}\nspec: {}\n", nil},
	} {
		sc, err := Load("mesh.yaml", []byte(tc.yaml))
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		m, err := sc.Build(defaultOpts)
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		var got []string
		for _, s := range m.Services {
			if s.Namespace == "istio-system" {
				got = append(got, s.Name)
			}
		}
		var pods int
		for _, p := range m.Pods {
			if p.Router {
				pods++
			}
		}
		if !slices.Equal(got, tc.want) || pods != len(tc.want) {
			t.Errorf("%s: Services %v and %d gateway pods, want %v with a pod each", tc.yaml, got, pods, tc.want)
		}
	}
}

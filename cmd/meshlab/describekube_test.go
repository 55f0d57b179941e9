package main

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDescribeClusterRoleAsKubectl holds describe of Istio's Prometheus ClusterRole to
// kubectl's output: rules broken down per resource, sorted as kubectl sorts them (by
// the rule's own string: verbs first, so nodes/metrics before nodes), URLs last.
func TestDescribeClusterRoleAsKubectl(t *testing.T) {
	const role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  labels:\n    app.kubernetes.io/name: prometheus\n  name: prometheus\nrules:\n" +
		"  - apiGroups: [\"\"]\n    resources: [nodes, nodes/proxy, nodes/metrics, services, endpoints, pods, ingresses, configmaps]\n    verbs: [get, list, watch]\n" +
		"  - apiGroups: [networking.k8s.io]\n    resources: [ingresses]\n    verbs: [get]\n  - apiGroups: [networking.k8s.io]\n    resources: [ingresses]\n    verbs: [list]\n" +
		"  - nonResourceURLs: [\"/metrics\"]\n    verbs: [get]\n"
	const want = `Name:         prometheus
Labels:       app.kubernetes.io/name=prometheus
Annotations:  <none>
PolicyRule:
  Resources                    Non-Resource URLs  Resource Names  Verbs
  ---------                    -----------------  --------------  -----
  configmaps                   []                 []              [get list watch]
  endpoints                    []                 []              [get list watch]
  ingresses                    []                 []              [get list watch]
  nodes/metrics                []                 []              [get list watch]
  nodes/proxy                  []                 []              [get list watch]
  nodes                        []                 []              [get list watch]
  pods                         []                 []              [get list watch]
  services                     []                 []              [get list watch]
  ingresses.networking.k8s.io  []                 []              [get list]
                               [/metrics]         []              [get]
`
	j, err := yaml.YAMLToJSON([]byte(role))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := kubeDescribers["ClusterRole"](&b, j); err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Errorf("describe clusterrole:\n%s\nwant:\n%s", b.String(), want)
	}
}

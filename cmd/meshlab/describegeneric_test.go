package main

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDescribeCustomAsKubectl holds describe of an Istio kind to kubectl's generic
// describer: name, namespace, labels and annotations first, then every other field sorted
// and labelled in words, lists of objects as consecutive blocks, one tab-aligned column
// across each run of value lines (the Events line included), Events: <none>.
func TestDescribeCustomAsKubectl(t *testing.T) {
	const dr = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  creationTimestamp: "2026-11-29T11:24:43Z"
  labels:
    app: reviews
  name: reviews
  namespace: default
spec:
  host: reviews
  subsets:
  - labels:
      version: v1
    name: v1
  - labels:
      version: v2
    name: v2
  trafficPolicy:
    connectionPool:
      tcp:
        maxConnections: 100
    loadBalancer:
      simple: RANDOM
`
	const want = `Name:         reviews
Namespace:    default
Labels:       app=reviews
Annotations:  <none>
API Version:  networking.istio.io/v1
Kind:         DestinationRule
Metadata:
  Creation Timestamp:  2026-11-29T11:24:43Z
Spec:
  Host:  reviews
  Subsets:
    Labels:
      Version:  v1
    Name:       v1
    Labels:
      Version:  v2
    Name:       v2
  Traffic Policy:
    Connection Pool:
      Tcp:
        Max Connections:  100
    Load Balancer:
      Simple:  RANDOM
Events:        <none>
`
	j, err := yaml.YAMLToJSON([]byte(dr))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := decodeObject(j)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := describeCustom(&b, obj); err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Errorf("describe destinationrule:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestFieldLabel holds kubectl's labels of fields: camel-case words capitalised, its
// acronyms in capitals, a field with other characters as it is.
func TestFieldLabel(t *testing.T) {
	for in, want := range map[string]string{
		"apiVersion":         "API Version",
		"gatewayClassName":   "Gateway Class Name",
		"uid":                "UID",
		"creationTimestamp":  "Creation Timestamp",
		"HTTPRoute":          "HTTP Route",
		"tls":                "Tls",
		"a-b":                "A - B",
		"app.kubernetes.io":  "app.kubernetes.io",
		"hbone_mtls_port":    "hbone_mtls_port",
		"maxRequestsPerConn": "Max Requests Per Conn",
	} {
		if got := fieldLabel(in); got != want {
			t.Errorf("fieldLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// get -o json|yaml prints as kubectl: the one object named, else a v1 List (zero or
// several items, as a kind, a selector or several names give), with kubectl's JSON
// indent and keys in the order the server's objects print.
func TestPrintKubeAsKubectl(t *testing.T) {
	svc := json.RawMessage(`{"kind":"Service","apiVersion":"v1","metadata":{"namespace":"default","name":"details"},"spec":{"ports":[{"port":9080,"name":"http"}]}}`)
	vs := json.RawMessage(`{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"details","namespace":"default"},"spec":{"hosts":["details"]}}`)
	cases := []struct {
		name, format string
		objs         []json.RawMessage
		single       bool
		want         string
	}{
		{"one named, json", "json", []json.RawMessage{svc}, true, `{
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {
        "name": "details",
        "namespace": "default"
    },
    "spec": {
        "ports": [
            {
                "name": "http",
                "port": 9080
            }
        ]
    }
}
`},
		{"several, yaml", "yaml", []json.RawMessage{svc, vs}, false, `apiVersion: v1
items:
- apiVersion: v1
  kind: Service
  metadata:
    name: details
    namespace: default
  spec:
    ports:
    - name: http
      port: 9080
- apiVersion: networking.istio.io/v1
  kind: VirtualService
  metadata:
    name: details
    namespace: default
  spec:
    hosts:
    - details
kind: List
metadata:
  resourceVersion: ""
`},
		{"a kind with one object is a List", "yaml", []json.RawMessage{vs}, false, "apiVersion: v1\nitems:\n- apiVersion: networking.istio.io/v1\n"},
		{"none", "json", nil, false, `{
    "apiVersion": "v1",
    "items": [],
    "kind": "List",
    "metadata": {
        "resourceVersion": ""
    }
}
`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := printKube(&b, tc.format, tc.objs, tc.single); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(b.String(), tc.want) {
				t.Errorf("printed:\n%s\nwant:\n%s", b.String(), tc.want)
			}
		})
	}
	if err := printKube(&strings.Builder{}, "json", []json.RawMessage{json.RawMessage(`{"metadata":{}}`)}, true); err == nil {
		t.Error("an object without kind printed; want an error")
	}
}

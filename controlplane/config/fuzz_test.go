package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/scenarios"
)

// FuzzLoad checks that no input makes Load panic, that every rejection is an ErrorList
// whose messages name the file, and that whatever Load accepts builds into a model with
// unique, short pod names.
func FuzzLoad(f *testing.F) {
	for _, name := range scenarios.Names() {
		data, _, err := scenarios.Lookup(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, seed := range []string{
		"",
		"---\n---\n",
		"- a\n- b\n",
		"kind: [x]\nmetadata: 3\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: x\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: backend}\nspec: {selector: {app: b}, ports: [{port: 70000, targetPort: http}]}\n",
		docs(service(okService), workload("backend", okWorkload+"  replicas: 3\n  app: {upstreams: ['http://a b/']}\n")),
		docs(service(okService), workload("backend", "  labels: {app: backend}\n  command: [x]\n  sidecar: {inject: false}\n")),
		"apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: x}\n",
		"apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: w}\nspec: {replicas: 256, Labels: {}}\n",
		"--- {apiVersion: v1, kind: Service, metadata: {name: a, namespace: b}}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: a}\nmetadata: {name: b}\n",
		backendDR,
		docs(httpbinManifest, curlManifest, reviewsManifest),
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: legacy, labels: {istio-injection: disabled}}\n",
		vs("  hosts: [backend]\n  http: [{match: [{uri: {regex: 'a+'}, headers: {x: {exact: y}}}], route: [{destination: {host: backend, subset: v1}, weight: 90}, {destination: {host: backend, subset: v2}, weight: 10}], timeout: 1.5s, retries: {attempts: 2, retryOn: 5xx}}]\n"),
		vs("  hosts: [backend]\n  tcp: [{route: [{destination: {host: backend, port: {number: 8080}}}]}]\n  http: [{redirect: {uri: /x}, fault: {abort: {httpStatus: 500, percentage: {value: 50}}}}]\n"),
		se("  hosts: [pay.internal]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{number: 80, name: http}]\n  endpoints: [{address: backend-v1}]\n"),
		"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: m}\nspec: {outboundTrafficPolicy: {mode: REGISTRY_ONLY}}\n",
		"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: m}\nspec: {rootNamespace: root}\n",
		"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: m}\nspec: {trustDomain: new-td, trustDomainAliases: [old-td, 'a..b', '']}\n",
		strings.Replace(reviewsManifest, "  name: reviews-v1\n", "  name: reviews-v1\n  annotations: {meshlab.dev/deleted-pods: '[\"reviews-v1-x\"]'}\n", 1),
		"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: m}\nspec: {accessLogFile: \"\", accessLogEncoding: JSON, accessLogFormat: '{\"a\": \"%RESPONSE_CODE%\"}'}\n",
		"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: m}\nspec: {accessLogFormat: '%REQ(X?Y):10% %%'}\n",
		pa("istio-system", "mesh", "  mtls: {mode: STRICT}\n"),
		pa("default", "w", "  selector: {matchLabels: {app: backend}}\n  mtls: {mode: PERMISSIVE}\n  portLevelMtls: {8080: {mode: DISABLE}}\n"),
		ap("a", "  selector: {matchLabels: {app: backend}}\n  action: DENY\n  rules: [{from: [{source: {principals: [\"*\"], notNamespaces: [x]}}], to: [{operation: {methods: [GET], paths: [/a*], ports: [\"8080\"]}}], when: [{key: \"request.headers[x]\", values: [y]}]}]\n"),
		ap("b", "  {}\n"),
		dr("  host: backend\n  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}, portLevelSettings: [{port: {number: 8080}, tls: {mode: DISABLE}}]}\n"),
	} {
		f.Add([]byte(seed))
	}
	hello, _, err := scenarios.Lookup("hello")
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(docs(string(hello), backendDR, vs("  hosts: [backend]\n  http: [{route: [{destination: {host: backend, subset: v2}}]}]\n"))))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Load("f.yaml", data)
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("Load error %T %v is not a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				if !strings.HasPrefix(e.Error(), "f.yaml: ") {
					t.Fatalf("message %q does not name the file", e)
				}
			}
			return
		}
		m, err := s.Build(defaultOpts)
		if err != nil {
			return // too many pods for the CIDR is a legitimate outcome
		}
		seen := map[string]bool{}
		for _, p := range m.Pods {
			if seen[p.Name] || len(p.Name) > maxPodName || !p.IP.IsValid() {
				t.Fatalf("pod %q: duplicate, too long or without an address", p.Name)
			}
			seen[p.Name] = true
		}
	})
}

package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/scenarios"
)

// service returns a Service document named backend with the given spec lines.
func service(spec string) string {
	return "apiVersion: v1\nkind: Service\nmetadata: {name: backend}\nspec:\n" + spec
}

// workload returns a Workload document with the given name and spec lines.
func workload(name, spec string) string {
	return "apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: " + name + "}\nspec:\n" + spec
}

const (
	okService  = "  selector: {app: backend}\n  ports: [{name: http, port: 8080}]\n"
	okWorkload = "  labels: {app: backend}\n  ports: [8080]\n"
)

func docs(d ...string) string { return strings.Join(d, "---\n") }

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want []string // each must be one of the returned errors, exactly
	}{
		{
			name: "yaml syntax error has the file line",
			yaml: docs(workload("backend", okWorkload), "kind: Service\nmetadata: {name: x\n  bad: [\n"),
			want: []string{"t.yaml: document 2: parse YAML: yaml: line 9: did not find expected ',' or '}'"},
		},
		{
			name: "not a mapping",
			yaml: "- a\n- b\n",
			want: []string{"t.yaml: document 1: document is not a mapping of fields (apiVersion, kind, metadata...)"},
		},
		{
			name: "missing apiVersion kind and name",
			yaml: "metadata: {}\n---\nkind: Service\napiVersion: v1\n",
			want: []string{
				"t.yaml: document 1: apiVersion: is required",
				"t.yaml: document 1: kind: is required",
				"t.yaml: document 1: metadata.name: is required",
				"t.yaml: document 2 (Service): metadata.name: is required",
			},
		},
		{
			name: "header field of the wrong type",
			yaml: "apiVersion: v1\nkind: [Service]\nmetadata: {name: x}\n",
			want: []string{"t.yaml: document 1: kind: must be a string"},
		},
		{
			name: "unknown kind",
			yaml: "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: web}\n",
			want: []string{`t.yaml: CronJob default/web: unknown kind "CronJob" in apiVersion "batch/v1" (meshlab reads v1 Service, Namespace, ServiceAccount, Secret, ConfigMap and Pod, apps/v1 Deployment, ReplicaSet, StatefulSet and DaemonSet, meshlab.dev/v1alpha1 Workload and MeshConfig, networking.k8s.io/v1 Ingress and IngressClass, networking.istio.io VirtualService, DestinationRule, ServiceEntry and Gateway, security.istio.io PeerAuthentication, AuthorizationPolicy and RequestAuthentication, gateway.networking.k8s.io GatewayClass, Gateway, HTTPRoute, GRPCRoute, TCPRoute and TLSRoute)`},
		},
		{
			name: "istio kind not supported yet",
			yaml: "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {name: x, namespace: default}\nspec: {}\n",
			want: []string{"t.yaml: WorkloadEntry default/x: kind WorkloadEntry is not supported yet"},
		},
		{
			name: "wrong apiVersion for a known kind",
			yaml: "apiVersion: v2\nkind: Service\nmetadata: {name: backend}\n",
			want: []string{`t.yaml: Service default/backend: apiVersion: "v2" is not an apiVersion of kind Service (want "v1")`},
		},
		{
			name: "unknown field names its path",
			yaml: docs(service("  selector: {app: backend}\n  ports: [{prot: http, port: 8080}]\n"), workload("backend", okWorkload)),
			want: []string{`t.yaml: Service default/backend: spec.ports[0].prot: unknown field`},
		},
		{
			name: "unknown field differing in case suggests the field",
			yaml: docs(service(okService), workload("backend", "  Labels: {app: backend}\n")),
			want: []string{`t.yaml: Workload default/backend: spec.Labels: unknown field (did you mean "labels"?)`},
		},
		{
			name: "wrong type",
			yaml: docs(service(okService), workload("backend", "  labels: {app: backend}\n  replicas: many\n")),
			want: []string{`t.yaml: Workload default/backend: spec.replicas: cannot decode a string into int`},
		},
		{
			name: "invalid names",
			yaml: docs(
				"apiVersion: v1\nkind: Service\nmetadata: {name: Backend_1, namespace: Prod}\nspec:\n"+okService,
				workload("a-very-long-workload-name-that-is-too-long-x", okWorkload),
			),
			want: []string{
				`t.yaml: Service Prod/Backend_1: metadata.name: "Backend_1" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)`,
				`t.yaml: Service Prod/Backend_1: metadata.namespace: "Prod" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)`,
				`t.yaml: Workload default/a-very-long-workload-name-that-is-too-long-x: metadata.name: "a-very-long-workload-name-that-is-too-long-x" is 44 characters, more than 40`,
			},
		},
		{
			name: "replica names too long",
			yaml: docs(service(okService), workload("backend-with-a-name-of-thirty-nine-char", okWorkload+"  replicas: 12\n")),
			want: []string{`t.yaml: Workload default/backend-with-a-name-of-thirty-nine-char: spec.replicas: pod name "backend-with-a-name-of-thirty-nine-char-0" is 41 characters, more than 40`},
		},
		{
			name: "duplicate object",
			yaml: docs(service(okService), workload("backend", okWorkload), service(okService)),
			want: []string{"t.yaml: Service default/backend: metadata.name: duplicate of the Service in document 1"},
		},
		{
			name: "duplicate pod names after replica expansion",
			yaml: docs(service(okService), workload("web", okWorkload+"  replicas: 2\n"), workload("web-1", okWorkload)),
			want: []string{`t.yaml: Workload default/web-1: metadata.name: pod "web-1" is also made by Workload default/web in document 2`},
		},
		{
			name: "pod names collide within a namespace",
			yaml: docs(service(okService), workload("backend", okWorkload),
				"apiVersion: v1\nkind: Pod\nmetadata: {name: backend}\nspec: {containers: [{name: a, image: curlimages/curl}]}\n"),
			want: []string{`t.yaml: Pod default/backend: metadata.name: pod "backend" is also made by Workload default/backend in document 2`},
		},
		{
			name: "service port out of range zero and duplicate",
			yaml: docs(service("  selector: {app: backend}\n  ports:\n  - {port: 70000}\n  - {port: 0}\n  - {port: 80, name: a}\n  - {port: 80, name: b, targetPort: 99999}\n"), workload("backend", okWorkload)),
			want: []string{
				"t.yaml: Service default/backend: spec.ports[0].port: 70000 is out of range 1-65535",
				"t.yaml: Service default/backend: spec.ports[1].port: 0 is out of range 1-65535",
				"t.yaml: Service default/backend: spec.ports[3].port: 80 is a duplicate of spec.ports[2].port",
				"t.yaml: Service default/backend: spec.ports[3].targetPort: 99999 is out of range 1-65535",
			},
		},
		{
			name: "ports reserved for the sidecar",
			yaml: docs(service("  selector: {app: backend}\n  ports:\n  - {port: 15001}\n  - {port: 80, targetPort: 15006}\n"), workload("backend", "  labels: {app: backend}\n  ports: [15090]\n")),
			want: []string{
				"t.yaml: Service default/backend: spec.ports[0].port: 15001 is reserved for the sidecar (the outbound capture port) (and targetPort defaults to it)",
				"t.yaml: Service default/backend: spec.ports[1].targetPort: 15006 is reserved for the sidecar (the inbound capture port)",
				"t.yaml: Workload default/backend: spec.ports[0]: 15090 is reserved for the sidecar (the proxy's Prometheus port)",
			},
		},
		{
			name: "named target port and udp",
			yaml: docs(service("  selector: {app: backend}\n  ports: [{port: 80, targetPort: http, protocol: UDP}]\n"), workload("backend", okWorkload)),
			want: []string{
				`t.yaml: Service default/backend: spec.ports[0].targetPort: named port "http" is not supported: give the container port number`,
				"t.yaml: Service default/backend: spec.ports[0].protocol: UDP is not supported (only TCP)",
			},
		},
		{
			name: "service fields meshlab cannot honour",
			yaml: docs(service(okService+"  type: LoadBalancer\n  externalName: x.example.com\n  sessionAffinity: ClientIP\n  clusterIP: None\n"), workload("backend", okWorkload)),
			want: []string{
				"t.yaml: Service default/backend: spec.type: LoadBalancer is not supported (meshlab has ClusterIP and ExternalName services)",
				"t.yaml: Service default/backend: spec.externalName: is read with type ExternalName only (the type here is LoadBalancer)",
				"t.yaml: Service default/backend: spec.sessionAffinity: ClientIP is not supported (only None)",
				"t.yaml: Service default/backend: spec.clusterIP: None (a headless service) is not supported",
			},
		},
		{
			name: "selector matches no workload",
			yaml: docs(service("  selector: {app: backend, version: v3}\n  ports: [{port: 80}]\n"), workload("backend", okWorkload)),
			want: []string{"t.yaml: Service default/backend: spec.selector: matches no Workload (no Workload in namespace default has the labels app=backend,version=v3)"},
		},
		{
			name: "selector in another namespace does not match",
			yaml: docs(service(okService), "apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: backend, namespace: other}\nspec: {labels: {app: backend}}\n"),
			want: []string{"t.yaml: Service default/backend: spec.selector: matches no Workload (no Workload in namespace default has the labels app=backend)"},
		},
		{
			name: "empty selector",
			yaml: docs(service("  ports: [{port: 80}]\n"), workload("backend", okWorkload)),
			want: []string{"t.yaml: Service default/backend: spec.selector: is required (meshlab has no manually managed Endpoints: a lab's Service selects its pods; for addresses outside them use a ServiceEntry, resolution STATIC with those endpoints or DNS with a host of the lab's outside world, or an ExternalName Service)"},
		},
		{
			name: "app and command",
			yaml: docs(service(okService), workload("backend", okWorkload+"  app: {}\n  command: [/bin/true]\n")),
			want: []string{"t.yaml: Workload default/backend: spec: app and command are mutually exclusive: set one"},
		},
		{
			name: "replicas out of range",
			yaml: docs(service(okService), workload("backend", okWorkload+"  replicas: -1\n"), workload("b2", okWorkload+"  replicas: 257\n")),
			want: []string{
				"t.yaml: Workload default/backend: spec.replicas: -1 is out of range 0-256",
				"t.yaml: Workload default/b2: spec.replicas: 257 is out of range 0-256",
			},
		},
		{
			name: "workload ports",
			yaml: docs(service(okService), workload("backend", "  labels: {app: backend}\n  ports: [8080, 0, 65536, 8080]\n")),
			want: []string{
				"t.yaml: Workload default/backend: spec.ports[1]: 0 is out of range 1-65535",
				"t.yaml: Workload default/backend: spec.ports[2]: 65536 is out of range 1-65535",
				"t.yaml: Workload default/backend: spec.ports[3]: 8080 is a duplicate of spec.ports[0]",
			},
		},
		{
			name: "upstream urls",
			yaml: docs(service(okService), workload("backend", okWorkload+"  app: {upstreams: ['http://a b/', 'backend:8080', 'http:///x']}\n")),
			want: []string{
				`t.yaml: Workload default/backend: spec.app.upstreams[0]: "http://a b/" is not a URL: parse "http://a b/": invalid character " " in host name`,
				`t.yaml: Workload default/backend: spec.app.upstreams[1]: "backend:8080" is not an http:// or https:// URL`,
				`t.yaml: Workload default/backend: spec.app.upstreams[2]: "http:///x" has no host`,
			},
		},
		{
			name: "app faults",
			yaml: docs(service(okService), workload("backend", okWorkload+"  app: {errorRate: 1.5, errorCode: 99, latency: soon}\n")),
			want: []string{
				"t.yaml: Workload default/backend: spec.app.errorRate: 1.5 is not between 0 and 1",
				"t.yaml: Workload default/backend: spec.app.errorCode: 99 is not an HTTP status between 200 and 599",
				`t.yaml: Workload default/backend: spec.app.latency: "soon" is not a non-negative duration such as "100ms"`,
			},
		},
		{
			name: "sidecar settings",
			yaml: docs(service(okService), workload("backend", okWorkload+"  sidecar: {inject: false, holdApplicationUntilProxyStarts: true, logLevel: loud}\n")),
			want: []string{
				`t.yaml: Workload default/backend: spec.sidecar.logLevel: "loud" is not one of [trace debug info warning warn error critical off]`,
				"t.yaml: Workload default/backend: spec.sidecar.holdApplicationUntilProxyStarts: needs a sidecar, but inject is false",
			},
		},
		{
			name: "relative envoy pin",
			yaml: docs(service(okService), workload("backend", okWorkload+"  sidecar: {proxyPath: bin/envoy}\n")),
			want: []string{`t.yaml: Workload default/backend: spec.sidecar.proxyPath: "bin/envoy" is not an absolute path`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Load("t.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Load succeeded with %d objects, want errors %q", len(s.Objects), tt.want)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Load error %T is not an ErrorList: %v", err, err)
			}
			got := map[string]bool{}
			for _, e := range list {
				got[e.Error()] = true
			}
			for _, w := range tt.want {
				if !got[w] {
					t.Errorf("missing error\n  %s\ngot:\n  %s", w, strings.ReplaceAll(err.Error(), "\n", "\n  "))
				}
			}
		})
	}
}

func TestLoadCollectsAllErrorsInFileOrder(t *testing.T) {
	t.Parallel()
	in := docs(
		service("  selector: {app: nobody}\n  ports: [{port: 0}]\n"),
		workload("backend", okWorkload+"  replicas: 300\n"),
		"apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: default}\n",
	)
	_, err := Load("t.yaml", []byte(in))
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 4 {
		t.Fatalf("Load error = %v, want 4 problems", err)
	}
	for i, wantDoc := range []int{1, 1, 2, 3} {
		if list[i].Doc != wantDoc {
			t.Errorf("problem %d (%v) is in document %d, want %d", i, list[i], list[i].Doc, wantDoc)
		}
	}
}

func TestLoadEveryIstioKindIsRecognised(t *testing.T) {
	t.Parallel()
	for _, k := range istioKindNames() {
		if _, ok := implementedIstioKinds[k]; ok {
			continue // tested in istio_test.go
		}
		in := "apiVersion: " + istioKinds[k] + "/v1beta1\nkind: " + k + "\nmetadata: {name: x, namespace: prod}\n"
		_, err := Load("t.yaml", []byte(in))
		want := "t.yaml: " + k + " prod/x: kind " + k + " is not supported yet"
		if why := unsupportedIstioKinds[k]; why != "" {
			want = "t.yaml: " + k + " prod/x: kind " + k + " is not supported by meshlab: " + why
		}
		if err == nil || err.Error() != want {
			t.Errorf("Load(%s) error = %v, want %q", k, err, want)
		}
	}
}

// A Service as `kubectl get svc -o yaml` prints it loads unchanged.
func TestLoadServiceFromCluster(t *testing.T) {
	t.Parallel()
	in := `apiVersion: v1
kind: Service
metadata:
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","kind":"Service"}
  creationTimestamp: "2024-05-01T10:00:00Z"
  labels: {app: reviews, service: reviews}
  name: reviews
  namespace: default
  resourceVersion: "1234"
  uid: 6f0c3f1e-0d0b-4a53-9a57-2e2f2b7d8c11
spec:
  clusterIP: 10.96.12.34
  clusterIPs: [10.96.12.34]
  internalTrafficPolicy: Cluster
  ipFamilies: [IPv4]
  ipFamilyPolicy: SingleStack
  ports:
  - name: http
    port: 9080
    protocol: TCP
    targetPort: 9080
  - name: metrics
    appProtocol: tcp
    port: 9090
    protocol: TCP
    targetPort: 19090
  selector: {app: reviews}
  sessionAffinity: None
  type: ClusterIP
status:
  loadBalancer: {}
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: reviews}
spec: {labels: {app: reviews}, ports: [9080]}
`
	s, err := Load("reviews.yaml", []byte(in))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	svc := s.Objects[0].svc
	want := []model.ServicePort{
		{Name: "http", Port: 9080, TargetPort: 9080, Protocol: model.ProtocolHTTP},
		{Name: "metrics", Port: 9090, TargetPort: 19090, Protocol: model.ProtocolTCP, AppProtocol: "tcp"},
	}
	if len(svc.Ports) != 2 || svc.Ports[0] != want[0] || svc.Ports[1] != want[1] {
		t.Errorf("ports = %+v, want %+v", svc.Ports, want)
	}
	if s.Objects[0].Service.Spec.ClusterIP != "10.96.12.34" || s.Objects[1].Workload.Metadata.Name != "reviews" {
		t.Errorf("decoded objects lost fields: %+v", s.Objects)
	}
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	s, err := Load("t.yaml", []byte("# only a comment\n---\n---\n"+docs(service(okService), workload("backend", okWorkload))))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(s.Objects) != 2 || s.Objects[0].Doc != 3 || s.Objects[0].Line != 3 {
		t.Fatalf("objects = %+v, want the Service as document 3 at line 3", s.Objects)
	}
	pod := s.Objects[1].pods[0]
	if pod.Name != "backend" || pod.Namespace != "default" || pod.ServiceAccount != "default" ||
		!pod.Sidecar.Inject || pod.Origin.String() != "t.yaml: Workload default/backend" {
		t.Errorf("pod = %+v, want defaults (namespace default, sa default, sidecar injected)", pod)
	}
}

func TestProtocolFor(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	tests := []struct {
		name        string
		appProtocol *string
		want        model.Protocol
	}{
		{"http", nil, model.ProtocolHTTP},
		{"http-web", nil, model.ProtocolHTTP},
		{"http2-api", nil, model.ProtocolHTTP2},
		{"grpc", nil, model.ProtocolGRPC},
		{"grpc-web", nil, model.ProtocolGRPC},
		{"tcp-db", nil, model.ProtocolTCP},
		{"tls", nil, model.ProtocolTLS},
		{"https-web", nil, model.ProtocolHTTPS},
		{"tcp", str("HTTPS"), model.ProtocolHTTPS},
		{"mongo", nil, model.ProtocolTCP},
		{"HTTP", nil, model.ProtocolHTTP},
		{"", nil, model.ProtocolAuto},
		{"web", nil, model.ProtocolAuto},
		{"httpfoo", nil, model.ProtocolAuto},
		{"tcpx", nil, model.ProtocolAuto},
		{"http", str("tcp"), model.ProtocolTCP},
		{"tcp", str("kubernetes.io/h2c"), model.ProtocolHTTP2},
		{"tcp", str("unknown"), model.ProtocolTCP},
		{"", str("unknown"), model.ProtocolAuto},
	}
	for _, tt := range tests {
		if got := protocolFor(tt.name, tt.appProtocol); got != tt.want {
			t.Errorf("protocolFor(%q, %v) = %v, want %v", tt.name, tt.appProtocol, got, tt.want)
		}
	}
}

func TestLoadBundledScenarios(t *testing.T) {
	t.Parallel()
	for _, name := range scenarios.Names() {
		data, file, err := scenarios.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Load(file, data); err != nil {
			t.Errorf("bundled scenario %s does not load:\n%v", file, err)
		}
	}
}

// Every kind with one apiVersion refuses another, naming the one it wants.
func TestFixedKindsRefuseOtherAPIVersions(t *testing.T) {
	t.Parallel()
	kinds := []string{"Service", "Secret", "ConfigMap", "Namespace", "ServiceAccount", "Workload", "MeshConfig", "Pod", "Deployment", "StatefulSet"}
	for _, k := range kinds {
		want, kd := fixedKind(k)
		if kd == kindRefused {
			t.Errorf("kind %s: not a fixed kind", k)
			continue
		}
		_, err := Load("k.yaml", []byte("apiVersion: wrong/v9\nkind: "+k+"\nmetadata: {name: x}\n"))
		if msg := fmt.Sprintf("apiVersion: \"wrong/v9\" is not an apiVersion of kind %s (want %q)", k, want); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("kind %s: err = %v, want %q", k, err, msg)
		}
	}
	if _, kd := fixedKind("VirtualService"); kd != kindRefused {
		t.Errorf("VirtualService is an Istio kind, not a fixed one")
	}
}

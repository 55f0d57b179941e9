package config

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/scenarios"
)

// helloYAML is the bundled hello scenario: Services frontend and backend, pods
// frontend-v1, backend-v1 (version v1) and backend-v2 (version v2).
func helloYAML(tb testing.TB) string {
	tb.Helper()
	data, _, err := scenarios.Lookup("hello")
	if err != nil {
		tb.Fatal(err)
	}
	return string(data)
}

const backendDR = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: backend}
spec:
  host: backend
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
`

func vs(spec string) string {
	return "apiVersion: networking.istio.io/v1beta1\nkind: VirtualService\nmetadata: {name: backend}\nspec:\n" + spec
}

func dr(spec string) string {
	return "apiVersion: networking.istio.io/v1alpha3\nkind: DestinationRule\nmetadata: {name: other}\nspec:\n" + spec
}

func se(spec string) string {
	return "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: pay}\nspec:\n" + spec
}

// A config with every implemented field loads, and the model carries it with hosts
// resolved to FQDNs.
func TestLoadIstioEveryImplementedField(t *testing.T) {
	t.Parallel()
	full := vs(`  hosts: [backend]
  gateways: [mesh]
  http:
  - name: canary
    match:
    - name: m
      uri: {prefix: /api}
      headers: {x-user: {exact: jason}, x-re: {regex: "a.*b"}}
      queryParams: {debug: {exact: "1"}}
      method: {exact: GET}
      sourceLabels: {app: frontend}
    route:
    - destination: {host: backend, subset: v2, port: {number: 8080}}
      weight: 90
      headers: {request: {set: {x-a: "1"}, add: {x-b: "2"}, remove: [x-c]}, response: {set: {x-d: "4"}}}
    - destination: {host: backend.default.svc.cluster.local, subset: v1}
      weight: 10
    timeout: 2s
    retries: {attempts: 3, perTryTimeout: 500ms, retryOn: "5xx,connect-failure,503"}
    fault:
      delay: {fixedDelay: 2s, percentage: {value: 100}}
      abort: {httpStatus: 503, percentage: {value: 50}}
    rewrite: {uri: /v2, authority: backend}
    mirror: {host: frontend.default, port: {number: 8080}}
    mirrorPercentage: {value: 10.5}
    headers: {response: {remove: [server]}}
  - redirect: {uri: /new, authority: frontend, redirectCode: 301}
  tcp:
  - route:
    - destination: {host: frontend.default.svc}
`)
	drFull := strings.Replace(backendDR, "  subsets:", `  trafficPolicy:
    loadBalancer: {simple: LEAST_REQUEST}
    connectionPool:
      tcp: {maxConnections: 1}
      http: {http1MaxPendingRequests: 1, http2MaxRequests: 10, maxRequestsPerConnection: 1}
    outlierDetection: {consecutive5xxErrors: 1, interval: 1s, baseEjectionTime: 30s, maxEjectionPercent: 100}
    portLevelSettings:
    - port: {number: 8080}
      loadBalancer: {simple: RANDOM}
  subsets:`, 1)
	drFull = strings.Replace(drFull, "{name: v2, labels: {version: v2}}", "{name: v2, labels: {version: v2}, trafficPolicy: {loadBalancer: {simple: ROUND_ROBIN}}}", 1)
	entry := se(`  hosts: [pay.internal]
  addresses: [10.97.0.1]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8080}]
  endpoints: [{address: backend-v1, labels: {version: v1}}, {address: 10.244.0.3, ports: {http: 8080}}]
`)
	mesh := "apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: mesh}\nspec: {outboundTrafficPolicy: {mode: REGISTRY_ONLY}}\n"
	s, err := Load("t.yaml", []byte(docs(helloYAML(t), full, drFull, entry, mesh)))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	m, err := s.Build(defaultOpts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if len(m.Istio.VirtualServices) != 1 || len(m.Istio.DestinationRules) != 1 || len(m.Istio.ServiceEntries) != 1 {
		t.Fatalf("model Istio = %+v, want one of each", m.Istio)
	}
	v := m.Istio.VirtualServices[0].Spec
	got := []string{v.Hosts[0], v.Http[0].Route[0].Destination.Host, v.Http[0].Route[1].Destination.Host, v.Http[0].Mirror.Host, v.Tcp[0].Route[0].Destination.Host, m.Istio.DestinationRules[0].Spec.Host}
	want := []string{"backend.default.svc.cluster.local", "backend.default.svc.cluster.local", "backend.default.svc.cluster.local", "frontend.default.svc.cluster.local", "frontend.default.svc.cluster.local", "backend.default.svc.cluster.local"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("resolved hosts = %v, want %v", got, want)
	}
	if s.Objects[5].VirtualService.Hosts[0] != "backend" {
		t.Errorf("the object's own spec was changed: hosts %v", s.Objects[5].VirtualService.Hosts)
	}
	eps := m.Istio.ServiceEntries[0].Spec.Endpoints
	if eps[0].Address != m.Pod("backend-v1").IP.String() || eps[1].Address != "10.244.0.3" {
		t.Errorf("ServiceEntry endpoints = %v, want pod IPs", eps)
	}
	if m.Mesh.OutboundTrafficPolicy != model.RegistryOnly {
		t.Errorf("outbound traffic policy = %s, want REGISTRY_ONLY", m.Mesh.OutboundTrafficPolicy)
	}
}

func TestLoadIstioErrors(t *testing.T) {
	t.Parallel()
	hello := helloYAML(t)
	tests := []struct {
		name string
		docs []string
		want []string
	}{
		{
			name: "unknown field with its path",
			docs: []string{vs("  hosts: [backend]\n  http: [{route: [{destination: {host: backend}, wieght: 1}]}]\n")},
			want: []string{"t.yaml: VirtualService default/backend: spec.http[0].route[0].wieght: unknown field"},
		},
		{
			// Istio's validation: a claim route applies to gateways only; "@" names no
			// header; a claim keeps its case.
			name: "jwt claim routes",
			docs: []string{vs(`  hosts: [backend]
  gateways: [mesh]
  http:
  - match: [{headers: {"@request.auth.claims.groups": {exact: g}, "@request.auth.claims[Nested][Role]": {exact: r}, "@foo": {exact: a}, "@request.auth.claims": {exact: b}}}]
    route: [{destination: {host: backend}}]
`)},
			want: []string{
				"t.yaml: VirtualService default/backend: spec.http[0].match[0].headers[@request.auth.claims.groups]: JWT claim based routing (key: @request.auth.claims.groups) is only supported for gateway, found no gateways: [mesh]",
				"t.yaml: VirtualService default/backend: spec.http[0].match[0].headers[@request.auth.claims[Nested][Role]]: JWT claim based routing (key: @request.auth.claims[Nested][Role]) is only supported for gateway, found no gateways: [mesh]",
				"t.yaml: VirtualService default/backend: spec.http[0].match[0].headers[@foo]: header name @foo is not a valid header name (a JWT claim is matched as @request.auth.claims.<claim> or @request.auth.claims[<claim>])",
				"t.yaml: VirtualService default/backend: spec.http[0].match[0].headers[@request.auth.claims]: header name @request.auth.claims is not a valid header name (a JWT claim is matched as @request.auth.claims.<claim> or @request.auth.claims[<claim>])",
			},
		},
		{
			name: "unknown field suggests the JSON name",
			docs: []string{vs("  hosts: [backend]\n  http: [{route: [{destination: {host: backend}}], Timeout: 1s}]\n")},
			want: []string{`t.yaml: VirtualService default/backend: spec.http[0].Timeout: unknown field (did you mean "timeout"?)`},
		},
		{
			name: "proto names parse",
			docs: []string{vs("  hosts: [backend]\n  http: [{route: [{destination: {host: backend}}], mirror_percentage: {value: 200}, mirror: {host: backend}}]\n")},
			want: []string{"t.yaml: VirtualService default/backend: spec.http[0].mirrorPercentage.value: 200 is out of range 0-100"},
		},
		{
			name: "type mismatch",
			docs: []string{vs("  hosts: backend\n")},
			want: []string{`t.yaml: VirtualService default/backend: spec: syntax error (line 1:10): unexpected token "backend"`},
		},
		{
			name: "top level and metadata (status, the cluster's observation, is dropped)",
			docs: []string{"apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: d, owner: me}\nstatus: {}\nspec: {host: backend}\n"},
			want: []string{
				"t.yaml: DestinationRule default/d: metadata.owner: unknown field",
			},
		},
		{
			name: "no spec",
			docs: []string{"apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: s}\n"},
			want: []string{"t.yaml: ServiceEntry default/s: spec: is required"},
		},
		{
			name: "unknown api version",
			docs: []string{"apiVersion: networking.istio.io/v2\nkind: ServiceEntry\nmetadata: {name: s}\nspec: {}\n"},
			want: []string{`t.yaml: ServiceEntry default/s: apiVersion: "networking.istio.io/v2": version v2 is not one meshlab reads (v1alpha3, v1beta1, v1)`},
		},
		{
			name: "refused fields by name",
			docs: []string{vs(`  hosts: [backend]
  exportTo: ["."]
  http:
  - match: [{uri: {exact: /}, ignoreUriCase: true, withoutHeaders: {x: {exact: z}}}]
    route: [{destination: {host: backend}}]
    corsPolicy: {allowOrigins: [{exact: x}]}
    fault: {delay: {exponentialDelay: 1s}, abort: {grpcStatus: UNAVAILABLE}}
`), backendDR, dr(`  host: frontend
  exportTo: ["."]
  trafficPolicy:
    loadBalancer: {consistentHash: {httpHeaderName: x}}
    tls: {mode: ISTIO_MUTUAL, insecureSkipVerify: true}
    outlierDetection: {consecutiveGatewayErrors: 1}
    portLevelSettings: [{port: {number: 8080}, tls: {mode: SIMPLE, clientCertificate: /c.pem}}]
`), se("  hosts: [pay.internal]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{number: 80, name: http}]\n  endpoints: [{address: backend-v1, network: n1}]\n  workloadSelector: {labels: {app: x}}\n")},
			want: []string{
				"t.yaml: VirtualService default/backend: spec.http[0].match[0].ignoreUriCase: is not supported by meshlab (VirtualService supports in http.match: gateways, headers, method, name, port, queryParams, sourceLabels, uri)",
				"t.yaml: VirtualService default/backend: spec.http[0].match[0].withoutHeaders: is not supported by meshlab (VirtualService supports in http.match: gateways, headers, method, name, port, queryParams, sourceLabels, uri)",
				"t.yaml: VirtualService default/backend: spec.http[0].fault.delay.exponentialDelay: is not supported by meshlab (VirtualService supports in http.fault.delay: fixedDelay, percent, percentage)",
				"t.yaml: VirtualService default/backend: spec.http[0].fault.abort.grpcStatus: is not supported by meshlab (VirtualService supports in http.fault.abort: httpStatus, percentage)",
				"t.yaml: VirtualService default/backend: spec.http[0].corsPolicy: is not supported by meshlab (VirtualService supports in http: fault, headers, match, mirror, mirrorPercentage, name, redirect, retries, rewrite, route, timeout)",
				"t.yaml: VirtualService default/backend: spec.exportTo: is not supported by meshlab (VirtualService supports here: gateways, hosts, http, tcp, tls)",
				"t.yaml: VirtualService default/backend: spec.http[0].fault.delay.fixedDelay: is required",
				"t.yaml: VirtualService default/backend: spec.http[0].fault.abort.httpStatus: 0 is out of range 200-599",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.loadBalancer.consistentHash: is not supported by meshlab (DestinationRule supports in trafficPolicy.loadBalancer: simple)",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.outlierDetection.consecutiveGatewayErrors: is not supported by meshlab (DestinationRule supports in trafficPolicy.outlierDetection: baseEjectionTime, consecutive5xxErrors, interval, maxEjectionPercent)",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.tls.insecureSkipVerify: is not supported by meshlab (DestinationRule supports in trafficPolicy.tls: caCertificates, clientCertificate, credentialName, mode, privateKey, sni, subjectAltNames)",
				"t.yaml: DestinationRule default/other: spec.exportTo: is not supported by meshlab (DestinationRule supports here: host, subsets, trafficPolicy)",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.portLevelSettings[0].tls.clientCertificate: is read with mode MUTUAL only (the mode here is SIMPLE)",
				"t.yaml: ServiceEntry default/pay: spec.endpoints[0].network: is not supported by meshlab (ServiceEntry supports in endpoints: address, labels, ports)",
				"t.yaml: ServiceEntry default/pay: spec.workloadSelector: is not supported by meshlab (ServiceEntry supports here: addresses, endpoints, hosts, location, ports, resolution)",
			},
		},
		{
			name: "wildcard service entry hosts",
			docs: []string{
				"apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: wikipedia}\nspec:\n  hosts: [\"*.wikipedia.org\"]\n  ports: [{number: 443, name: https, protocol: HTTPS}]\n",
				"apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: dns}\nspec:\n  hosts: [\"*.example.org\"]\n  resolution: DNS\n  ports: [{number: 443, name: tls, protocol: TLS}]\n",
				"apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: web}\nspec:\n  hosts: [\"*.example.com\", \"*\", \"a.*.com\"]\n  ports: [{number: 80, name: http}]\n",
			},
			want: []string{
				`t.yaml: ServiceEntry default/dns: spec.hosts[0]: "*.example.org": a wildcard host cannot be resolved by DNS (resolution DNS needs the names themselves; use resolution NONE, as the wildcard egress task does)`,
				`t.yaml: ServiceEntry default/web: spec.ports[0].protocol: "HTTP" on wildcard host "*.example.com" is not supported: meshlab's sidecars route a wildcard entry by the TLS SNI alone; use protocol HTTPS or TLS, or an entry naming each host`,
				`t.yaml: ServiceEntry default/web: spec.hosts[1]: "*": wildcard hosts are not supported`,
				`t.yaml: ServiceEntry default/web: spec.hosts[2]: "a.*.com": wildcard hosts are not supported`,
			},
		},
		{
			name: "virtual service rules",
			docs: []string{vs(`  hosts: ["*", ""]
  gateways: [mesh]
  http:
  - match: [{uri: {regex: "a(b"}, headers: {X-User: {exact: a}, x-e: {}}, method: {prefix: ""}}]
    route:
    - {destination: {host: backend}, weight: 80}
    - {destination: {host: backend}, weight: -5}
    timeout: 0.5ms
    retries: {attempts: -1, perTryTimeout: 1.0005s, retryOn: "5xx,bogus"}
    fault: {abort: {httpStatus: 700, percentage: {value: 101}}, delay: {fixedDelay: 1s, percentage: {value: -1}}}
    rewrite: {}
    redirect: {uri: /x}
  - {}
  - redirect: {redirectCode: 200}
    mirror: {host: backend}
  - {route: [{destination: {host: backend}}], mirrorPercentage: {value: 5}}
  tcp: [{}]
`)},
			want: []string{
				`t.yaml: VirtualService default/backend: spec.hosts[0]: "*": wildcard hosts are not supported`,
				"t.yaml: VirtualService default/backend: spec.hosts[1]: must not be empty",
				`t.yaml: VirtualService default/backend: spec.http[0].match[0].uri.regex: "a(b" is not an RE2 regular expression: error parsing regexp: missing closing ): ` + "`a(b`",
				"t.yaml: VirtualService default/backend: spec.http[0].match[0].method.prefix: must not be empty",
				"t.yaml: VirtualService default/backend: spec.http[0].match[0].headers[X-User]: header names must be lowercase",
				"t.yaml: VirtualService default/backend: spec.http[0].match[0].headers[x-e]: exact, prefix or regex is required",
				"t.yaml: VirtualService default/backend: spec.http[0]: route and redirect are mutually exclusive",
				"t.yaml: VirtualService default/backend: spec.http[0].route[1].weight: -5 must not be negative",
				"t.yaml: VirtualService default/backend: spec.http[0].timeout: 500µs is shorter than 1ms",
				"t.yaml: VirtualService default/backend: spec.http[0].retries.attempts: -1 must not be negative",
				"t.yaml: VirtualService default/backend: spec.http[0].retries.perTryTimeout: 1.0005s is not a whole number of milliseconds",
				`t.yaml: VirtualService default/backend: spec.http[0].retries.retryOn: "bogus" is not a retry condition (5xx, gateway-error, reset, connect-failure, retriable-4xx, refused-stream, retriable-status-codes, an HTTP status...)`,
				"t.yaml: VirtualService default/backend: spec.http[0].fault.delay.percentage.value: -1 is out of range 0-100",
				"t.yaml: VirtualService default/backend: spec.http[0].fault.abort.httpStatus: 700 is out of range 200-599",
				"t.yaml: VirtualService default/backend: spec.http[0].fault.abort.percentage.value: 101 is out of range 0-100",
				"t.yaml: VirtualService default/backend: spec.http[0].rewrite: uri or authority is required",
				"t.yaml: VirtualService default/backend: spec.http[1]: a route or a redirect is required",
				"t.yaml: VirtualService default/backend: spec.http[2].mirror: cannot be set with redirect",
				"t.yaml: VirtualService default/backend: spec.http[2].redirect: uri or authority is required",
				"t.yaml: VirtualService default/backend: spec.http[2].redirect.redirectCode: 200 is not a redirect code (301, 302, 303, 307 or 308)",
				"t.yaml: VirtualService default/backend: spec.http[3].mirrorPercentage: needs mirror",
				"t.yaml: VirtualService default/backend: spec.tcp[0].route: at least one destination is required",
			},
		},
		{
			name: "no routes, no hosts",
			docs: []string{vs("  hosts: []\n")},
			want: []string{
				"t.yaml: VirtualService default/backend: spec.hosts: at least one host is required",
				"t.yaml: VirtualService default/backend: spec: at least one http, tcp or tls route is required",
			},
		},
		{
			name: "destination rule rules",
			docs: []string{dr(`  host: ""
  trafficPolicy:
    loadBalancer: {simple: PASSTHROUGH}
    connectionPool: {tcp: {maxConnections: -1}, http: {http1MaxPendingRequests: -1, http2MaxRequests: -2, maxRequestsPerConnection: -3}}
    outlierDetection: {interval: 0s, baseEjectionTime: 1.5ms, maxEjectionPercent: 101}
    portLevelSettings: [{port: {number: 8080}}, {port: {number: 8080}}, {loadBalancer: {simple: LEAST_CONN}}]
  subsets: [{name: v1}, {name: v1}, {name: V_2}]
`)},
			want: []string{
				"t.yaml: DestinationRule default/other: spec.host: is required",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.loadBalancer.simple: PASSTHROUGH is not supported (ROUND_ROBIN, LEAST_REQUEST or RANDOM)",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.connectionPool.tcp.maxConnections: -1 must not be negative",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.connectionPool.http.http1MaxPendingRequests: -1 must not be negative",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.connectionPool.http.http2MaxRequests: -2 must not be negative",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.connectionPool.http.maxRequestsPerConnection: -3 must not be negative",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.outlierDetection.interval: 0s is shorter than 1ms",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.outlierDetection.baseEjectionTime: 1.5ms is not a whole number of milliseconds",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.outlierDetection.maxEjectionPercent: 101 is out of range 0-100",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.portLevelSettings[1].port.number: 8080 is a duplicate of spec.trafficPolicy.portLevelSettings[0]",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.portLevelSettings[2].port.number: 0 is out of range 1-65535",
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.portLevelSettings[2].loadBalancer.simple: LEAST_CONN is not supported (ROUND_ROBIN, LEAST_REQUEST or RANDOM)",
				`t.yaml: DestinationRule default/other: spec.subsets[1].name: "v1" is a duplicate of spec.subsets[0].name`,
				`t.yaml: DestinationRule default/other: spec.subsets[2].name: "V_2" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)`,
			},
		},
		{
			name: "service entry rules",
			docs: []string{se(`  hosts: [pay.internal]
  addresses: [10.0.0.0/24]
  resolution: NONE
  ports: [{number: 0, name: http, protocol: QUIC, targetPort: 15001}, {number: 80}]
  endpoints: [{address: "", ports: {grpc: 15000}}]
`)},
			want: []string{
				`t.yaml: ServiceEntry default/pay: spec.addresses[0]: "10.0.0.0/24" is not an IPv4 address or a /32 (wider CIDRs are not supported: name each address)`,
				"t.yaml: ServiceEntry default/pay: spec.ports[0].number: 0 is out of range 1-65535",
				`t.yaml: ServiceEntry default/pay: spec.ports[0].protocol: "QUIC" is not a protocol meshlab knows (HTTP, HTTP2, GRPC, TCP...)`,
				"t.yaml: ServiceEntry default/pay: spec.ports[0].targetPort: 15001 is reserved for the sidecar (the outbound capture port)",
				"t.yaml: ServiceEntry default/pay: spec.ports[1].name: is required",
				"t.yaml: ServiceEntry default/pay: spec.endpoints: resolution NONE takes no endpoints in meshlab (connections go to the address the client dialled; use STATIC to name endpoints)",
				"t.yaml: ServiceEntry default/pay: spec.endpoints[0].address: is required",
				"t.yaml: ServiceEntry default/pay: spec.endpoints[0].ports[grpc]: names no port of spec.ports",
				"t.yaml: ServiceEntry default/pay: spec.endpoints[0].ports[grpc]: 15000 is reserved for the sidecar (the proxy's admin port)",
			},
		},
		{
			name: "references",
			docs: []string{vs(`  hosts: [reviews, backend]
  http:
  - route:
    - {destination: {host: backend, subset: v3}, weight: 50}
    - {destination: {host: backend.prod, port: {number: 9090}}, weight: 50}
    mirror: {host: frontend, port: {number: 9090}}
`), backendDR, dr("  host: backend.default.svc.cluster.local\n"),
				strings.Replace(dr("  host: nowhere\n"), "name: other", "name: nowhere", 1),
				strings.Replace(dr("  host: frontend\n  trafficPolicy: {portLevelSettings: [{port: {number: 9}}]}\n"), "name: other", "name: front", 1),
				se("  hosts: [backend, pay.internal]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{number: 80, name: http}]\n  endpoints: [{address: nobody}]\n"),
				strings.Replace(se("  hosts: [pay.internal]\n  location: MESH_INTERNAL\n  resolution: DNS\n  ports: [{number: 80, name: http}]\n  endpoints: [{address: pay.internal}]\n"), "name: pay", "name: pay2", 1),
				"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: a}\nspec: {}\n",
				"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: b}\nspec: {}\n",
			},
			want: []string{
				"t.yaml: VirtualService default/backend: spec.http[0].mirror.port.number: 9090 is not a port of frontend.default.svc.cluster.local",
				"t.yaml: DestinationRule default/front: spec.trafficPolicy.portLevelSettings[0].port.number: 9 is not a port of frontend.default.svc.cluster.local",
				`t.yaml: ServiceEntry default/pay: spec.hosts[0]: "backend" is already the Service t.yaml: Service default/backend`,
				`t.yaml: ServiceEntry default/pay: spec.endpoints[0].address: "nobody" is neither the name nor the IP of a lab pod`,
				`t.yaml: ServiceEntry default/pay2: spec.hosts[0]: "pay.internal" is already a host of t.yaml: ServiceEntry default/pay`,
				`t.yaml: ServiceEntry default/pay2: spec.endpoints[0].address: "pay.internal" names no Service of the lab (resolution DNS resolves lab Service names)`,
				"t.yaml: MeshConfig default/b: a lab has one MeshConfig; t.yaml: MeshConfig default/a is already one",
			},
		},
		{
			name: "mesh config refuses other fields",
			docs: []string{"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: m}\nspec: {accessLogFile: /dev/stdout, outboundTrafficPolicy: {mode: ALLOW_ANY}, bogus: 1}\n"},
			want: []string{"t.yaml: MeshConfig default/m: spec.bogus: unknown field"},
		},
		{
			name: "mesh config refuses unimplemented fields",
			docs: []string{"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: m}\nspec: {enablePrometheusMerge: true, extensionProviders: [{name: jaeger, opentelemetry: {port: 4317, service: jaeger-collector.istio-system.svc.cluster.local, dynatraceSampler: {tenant: abc, clusterId: 123}}}]}\n"},
			want: []string{
				"t.yaml: MeshConfig default/m: spec.enablePrometheusMerge: is not supported by meshlab (MeshConfig supports here: accessLogEncoding, accessLogFile, accessLogFormat, certificates, defaultConfig, defaultProviders, enableTracing, extensionProviders, meshMTLS, outboundTrafficPolicy, rootNamespace, trustDomain, trustDomainAliases)",
				"t.yaml: MeshConfig default/m: spec.extensionProviders[0].opentelemetry.dynatraceSampler: is not supported by meshlab (MeshConfig supports in extensionProviders.opentelemetry: grpc, http, maxTagLength, port, resourceDetectors, service): meshlab's proxies have no OpenTelemetry samplers; leave it out and sample with the Telemetry's randomSamplingPercentage (or defaultConfig.tracing.sampling)",
			},
		},
		{
			name: "mesh config refuses meshMTLS fields but minProtocolVersion",
			docs: []string{"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: m}\nspec: {meshMTLS: {minProtocolVersion: TLSV1_3, cipherSuites: [AES128-GCM-SHA256]}}\n"},
			want: []string{"t.yaml: MeshConfig default/m: spec.meshMTLS.cipherSuites: is not supported by meshlab (MeshConfig supports in meshMTLS: minProtocolVersion)"},
		},
		{
			name: "mesh config access log",
			docs: []string{"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: m}\nspec: {accessLogFile: stdout, accessLogFormat: '[%START_TIME%] %BAD OP% %DURATION'}\n",
				"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: j}\nspec: {accessLogEncoding: JSON, accessLogFormat: '{\"a\": 1}'}\n",
				"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: k}\nspec: {accessLogEncoding: JSON, accessLogFormat: 'nope'}\n",
			},
			want: []string{
				`t.yaml: MeshConfig default/m: spec.accessLogFile: "stdout" must be an absolute path (/dev/stdout is the proxy's log), or "" to turn access logs off`,
				`t.yaml: MeshConfig default/m: spec.accessLogFormat: "%BAD OP%" is not a command operator (OPERATOR, OPERATOR(arg) or OPERATOR(arg):length)`,
				"t.yaml: MeshConfig default/j: spec.accessLogFormat: a: must be a format string or a nested object",
				"t.yaml: MeshConfig default/k: spec.accessLogFormat: with accessLogEncoding JSON must be a JSON object of format strings: invalid character 'o' in literal null (expecting 'u')",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load("t.yaml", []byte(docs(append([]string{hello}, tt.docs...)...)))
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Load error = %v, want an ErrorList", err)
			}
			var got []string
			for _, e := range list {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("errors:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}

// Every field path in the implemented sets exists in istio.io/api's schema: a typo in a
// set would silently refuse a field meshlab implements.
func TestImplementedFieldsExist(t *testing.T) {
	t.Parallel()
	// Exercised through TestLoadIstioEveryImplementedField for the common paths; here
	// check that each set's top-level names are real fields.
	for kind, set := range map[string]map[string]bool{"vs": virtualServiceFields(), "dr": destinationRuleFields(), "se": serviceEntryFields()} {
		if len(set) < 5 {
			t.Errorf("%s: only %d implemented fields", kind, len(set))
		}
	}
}

func TestScenarioApplyAndDelete(t *testing.T) {
	t.Parallel()
	base, err := Load("hello.yaml", []byte(helloYAML(t)))
	if err != nil {
		t.Fatal(err)
	}
	split := vs("  hosts: [backend]\n  http: [{route: [{destination: {host: backend, subset: v1}, weight: 90}, {destination: {host: backend, subset: v2}, weight: 10}]}]\n")
	// A refused apply leaves the base untouched.
	if _, _, err := base.Apply(File{Name: "vs.yaml", Data: []byte(strings.Replace(split, "weight: 90", "weight: -90", 1))}); err == nil ||
		!strings.Contains(err.Error(), `vs.yaml: VirtualService default/backend: spec.http[0].route[0].weight: -90 must not be negative`) {
		t.Fatalf("Apply of a negative weight: err = %v", err)
	}
	if len(base.Objects) != 5 {
		t.Fatalf("base changed: %d objects", len(base.Objects))
	}
	next, changes, err := base.Apply(File{Name: "dr.yaml", Data: []byte(backendDR)}, File{Name: "vs.yaml", Data: []byte(split)})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if got := changeStrings(changes); got != "DestinationRule default/backend created, VirtualService default/backend created" {
		t.Errorf("changes = %s", got)
	}
	// Re-applying is unchanged; a different weight is configured.
	again, changes, err := next.Apply(File{Name: "vs.yaml", Data: []byte(split)})
	if err != nil || changeStrings(changes) != "VirtualService default/backend unchanged" {
		t.Fatalf("re-Apply: %s, %v", changeStrings(changes), err)
	}
	_, changes, err = again.Apply(File{Name: "vs.yaml", Data: []byte(strings.ReplaceAll(strings.ReplaceAll(split, "90", "50"), "10}", "50}"))})
	if err != nil || changeStrings(changes) != "VirtualService default/backend configured" {
		t.Fatalf("Apply changed weights: %s, %v", changeStrings(changes), err)
	}
	// Deleting the DestinationRule the VirtualService's subsets come from is accepted, as
	// in Istio: the routes then name clusters that do not exist (503 at run time).
	if _, changes, err := next.Delete(Ref{Kind: "dr", Name: "backend"}); err != nil || changeStrings(changes) != "DestinationRule default/backend deleted" {
		t.Errorf("Delete of the subsets' DestinationRule: %s, %v", changeStrings(changes), err)
	}
	if _, _, err := next.Delete(Ref{Kind: "vs", Name: "nope"}); err == nil || err.Error() != "delete: not found: VirtualService default/nope" {
		t.Errorf("Delete of a missing object: err = %v", err)
	}
	refs, err := Refs("x.yaml", "", []byte(docs(split, backendDR)))
	if err != nil {
		t.Fatal(err)
	}
	after, changes, err := next.Delete(refs...)
	if err != nil || changeStrings(changes) != "VirtualService default/backend deleted, DestinationRule default/backend deleted" || len(after.Objects) != 5 {
		t.Errorf("Delete: %s, %v", changeStrings(changes), err)
	}
	found, err := next.Find("virtualservices", "")
	if err != nil || len(found) != 1 || found[0].Origin.File != "vs.yaml" || !strings.Contains(string(found[0].JSON), `"weight":90`) {
		t.Errorf("Find = %v, %v", found, err)
	}
	if _, err := next.Find("workloadentry", ""); err == nil {
		t.Error("Find of an unknown kind succeeded")
	}
	// Duplicates across the applied files are refused.
	if _, _, err := base.Apply(File{Name: "a.yaml", Data: []byte(backendDR)}, File{Name: "b.yaml", Data: []byte(backendDR)}); err == nil ||
		err.Error() != "b.yaml: DestinationRule default/backend: metadata.name: duplicate of the DestinationRule in a.yaml" {
		t.Errorf("Apply of duplicates: err = %v", err)
	}
	m, err := next.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.1.0.0/24"), ServiceCIDR: netip.MustParsePrefix("10.2.0.0/24")})
	if err != nil || len(m.Istio.VirtualServices) != 1 {
		t.Errorf("Build after Apply: %v", err)
	}
}

func changeStrings(cs []Change) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.String())
	}
	return strings.Join(out, ", ")
}

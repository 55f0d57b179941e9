package config

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	security "istio.io/api/security/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

func pa(ns, name, spec string) string {
	return "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n" + spec
}

func ap(name, spec string) string {
	return "apiVersion: security.istio.io/v1beta1\nkind: AuthorizationPolicy\nmetadata: {name: " + name + "}\nspec:\n" + spec
}

// Every implemented security field loads, and the objects land in the model sorted by
// namespace and name, with empty selectors normalised to nil.
func TestLoadSecurityObjects(t *testing.T) {
	t.Parallel()
	allow := ap("allow", `  selector: {matchLabels: {app: backend, version: v1}}
  action: ALLOW
  rules:
  - from:
    - source: {principals: [cluster.local/ns/default/sa/frontend, "*/sa/x"], notPrincipals: ["*"]}
    - source: {namespaces: [default, "prod-*"], notNamespaces: [kube-system]}
    to:
    - operation: {methods: [GET, HEAD], notMethods: [POST], paths: [/api/*, "*.css", /], notPaths: [/admin], ports: ["8080"], notPorts: ["9090"]}
    when:
    - {key: "request.headers[x-user]", values: [jason, "*"], notValues: [bob]}
  - {}
`)
	deny := ap("deny", "  action: DENY\n  rules: [{to: [{operation: {paths: [/secret]}}]}]\n")
	nothing := ap("allow-nothing", "  {}\n")
	strict := pa("istio-system", "mesh", "  mtls: {mode: STRICT}\n")
	ns := pa("default", "ns", "  selector: {}\n  mtls: {mode: PERMISSIVE}\n")
	port := pa("default", "backend", "  selector: {matchLabels: {app: backend}}\n  mtls: {mode: UNSET}\n  portLevelMtls: {8080: {mode: DISABLE}, 9090: {}}\n")
	drTLS := dr(`  host: backend
  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL}
    portLevelSettings: [{port: {number: 8080}, tls: {mode: DISABLE}}]
  subsets: [{name: v1, labels: {version: v1}, trafficPolicy: {tls: {}}}]
`)
	mesh := "apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: m}\nspec: {rootNamespace: mesh-root}\n"
	s, err := Load("t.yaml", []byte(docs(helloYAML(t), allow, deny, nothing, strict, ns, port, drTLS, mesh)))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	m, err := s.Build(defaultOpts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var names []string
	for _, c := range m.Istio.PeerAuthentications {
		names = append(names, c.Namespace+"/"+c.Name)
	}
	for _, c := range m.Istio.AuthorizationPolicies {
		names = append(names, c.Namespace+"/"+c.Name)
	}
	if got, want := strings.Join(names, " "), "default/backend default/ns istio-system/mesh default/allow default/allow-nothing default/deny"; got != want {
		t.Fatalf("model objects = %s, want %s", got, want)
	}
	pas, aps := m.Istio.PeerAuthentications, m.Istio.AuthorizationPolicies
	if pas[1].Spec.Selector != nil || pas[1].Spec.GetMtls().GetMode() != security.PeerAuthentication_MutualTLS_PERMISSIVE {
		t.Errorf("namespace policy = %v, want no selector and PERMISSIVE", pas[1].Spec)
	}
	if s.Objects[10].PeerAuthentication.Selector == nil {
		t.Errorf("the object's own spec was changed: %v", s.Objects[10].PeerAuthentication)
	}
	plm := pas[0].Spec.GetPortLevelMtls()
	if pas[0].Spec.GetMtls().GetMode() != security.PeerAuthentication_MutualTLS_UNSET || plm[8080].GetMode() != security.PeerAuthentication_MutualTLS_DISABLE || plm[9090].GetMode() != security.PeerAuthentication_MutualTLS_UNSET {
		t.Errorf("workload policy = %v", pas[0].Spec)
	}
	if pas[0].Origin.File != "t.yaml" || pas[0].Origin.Kind != "PeerAuthentication" {
		t.Errorf("origin = %v", pas[0].Origin)
	}
	r := aps[0].Spec.GetRules()
	if aps[0].Spec.GetAction() != security.AuthorizationPolicy_ALLOW || len(r) != 2 || r[0].GetWhen()[0].GetKey() != "request.headers[x-user]" ||
		r[0].GetTo()[0].GetOperation().GetPorts()[0] != "8080" || len(aps[0].Spec.GetSelector().GetMatchLabels()) != 2 {
		t.Errorf("allow policy = %v", aps[0].Spec)
	}
	if len(aps[1].Spec.GetRules()) != 0 || aps[1].Spec.GetAction() != security.AuthorizationPolicy_ALLOW {
		t.Errorf("allow-nothing policy = %v, want ALLOW without rules", aps[1].Spec)
	}
	if aps[2].Spec.GetAction() != security.AuthorizationPolicy_DENY {
		t.Errorf("deny policy = %v", aps[2].Spec)
	}
	if m.Mesh.Root() != "mesh-root" {
		t.Errorf("root namespace = %q, want mesh-root", m.Mesh.Root())
	}
	tp := m.Istio.DestinationRules[0].Spec.GetTrafficPolicy()
	if tp.GetTls().GetMode().String() != "ISTIO_MUTUAL" || tp.GetPortLevelSettings()[0].GetTls().GetMode().String() != "DISABLE" ||
		m.Istio.DestinationRules[0].Spec.GetSubsets()[0].GetTrafficPolicy().GetTls() == nil {
		t.Errorf("DestinationRule tls = %v", m.Istio.DestinationRules[0].Spec)
	}
}

func TestLoadSecurityErrors(t *testing.T) {
	t.Parallel()
	hello := helloYAML(t)
	tests := []struct {
		name string
		docs []string
		want []string
	}{
		{
			// Istio's validation webhook (validateMetadata's checkDryRunAnnotation).
			name: "dry-run annotation",
			docs: []string{
				"apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: bad-value, annotations: {istio.io/dry-run: maybe}}\nspec: {action: DENY}\n",
				"apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: not-authz, annotations: {istio.io/dry-run: \"true\"}}\nspec: {}\n",
				"apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: good, annotations: {istio.io/dry-run: \"false\"}}\nspec: {action: ALLOW}\n",
				"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kube-kind, annotations: {istio.io/dry-run: maybe}}\ndata: {}\n",
			},
			want: []string{
				`t.yaml: AuthorizationPolicy default/bad-value: metadata.annotations.istio.io/dry-run: invalid value "maybe": want true or false`,
				"t.yaml: PeerAuthentication default/not-authz: metadata.annotations.istio.io/dry-run: unsupported annotation on a PeerAuthentication (only an AuthorizationPolicy can be dry-run): remove the annotation",
			},
		},
		{
			name: "security version",
			docs: []string{"apiVersion: security.istio.io/v1alpha3\nkind: PeerAuthentication\nmetadata: {name: p}\nspec: {}\n"},
			want: []string{`t.yaml: PeerAuthentication default/p: apiVersion: "security.istio.io/v1alpha3": version v1alpha3 is not one meshlab reads (v1beta1, v1)`},
		},
		{
			name: "unknown field",
			docs: []string{pa("default", "p", "  mtls: {mod: STRICT}\n")},
			want: []string{"t.yaml: PeerAuthentication default/p: spec.mtls.mod: unknown field"},
		},
		{
			name: "unknown mode",
			docs: []string{pa("default", "p", "  mtls: {mode: STRICTER}\n")},
			want: []string{`t.yaml: PeerAuthentication default/p: spec: (line 1:17): invalid value for enum field mode: "STRICTER"`},
		},
		{
			name: "numeric mode out of range",
			docs: []string{pa("default", "p", "  selector: {matchLabels: {app: backend}}\n  mtls: {mode: 7}\n  portLevelMtls: {8080: {mode: 9}}\n")},
			want: []string{
				"t.yaml: PeerAuthentication default/p: spec.mtls.mode: 7 is not a mode (UNSET, DISABLE, PERMISSIVE or STRICT)",
				"t.yaml: PeerAuthentication default/p: spec.portLevelMtls[8080].mode: 9 is not a mode (UNSET, DISABLE, PERMISSIVE or STRICT)",
			},
		},
		{
			name: "port-level mTLS needs a selector and real ports",
			docs: []string{pa("default", "p", "  selector: {}\n  portLevelMtls: {0: {mode: STRICT}, 70000: {mode: STRICT}, 8080: {mode: DISABLE}}\n")},
			want: []string{
				"t.yaml: PeerAuthentication default/p: spec.portLevelMtls: needs a selector with matchLabels (a mesh-wide or namespace-wide policy cannot set port-level mTLS, as in Istio)",
				"t.yaml: PeerAuthentication default/p: spec.portLevelMtls[0]: 0 is out of range 1-65535",
				"t.yaml: PeerAuthentication default/p: spec.portLevelMtls[70000]: 70000 is out of range 1-65535",
			},
		},
		{
			name: "selector labels",
			docs: []string{pa("default", "p", "  selector: {matchLabels: {\"a b\": x, app: \"-bad\", ver: \"v*\", \"\": z}}\n")},
			want: []string{
				"t.yaml: PeerAuthentication default/p: spec.selector.matchLabels: a label key must not be empty",
				`t.yaml: PeerAuthentication default/p: spec.selector.matchLabels[a b]: "a b" is not a label key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
				`t.yaml: PeerAuthentication default/p: spec.selector.matchLabels[app]: "-bad" is not a label value: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
				"t.yaml: PeerAuthentication default/p: spec.selector.matchLabels[ver]: wildcards are not supported in a selector",
			},
		},
		{
			name: "two mesh-wide policies",
			docs: []string{hello, pa("istio-system", "b", "  mtls: {mode: STRICT}\n"), pa("istio-system", "a", "  selector: {}\n"),
				pa("istio-system", "c", "  selector: {matchLabels: {app: x}}\n"), pa("default", "d", "  mtls: {mode: STRICT}\n")},
			want: []string{"t.yaml: PeerAuthentication istio-system/b: spec.selector: a mesh has one mesh-wide PeerAuthentication (no selector, in the root namespace istio-system); t.yaml: PeerAuthentication istio-system/a is already one"},
		},
		{
			name: "mesh-wide follows the root namespace",
			docs: []string{hello, pa("istio-system", "b", "  {}\n"), pa("istio-system", "a", "  {}\n"),
				pa("root", "p2", "  {}\n"), pa("root", "p1", "  {}\n"),
				"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: m}\nspec: {rootNamespace: root}\n"},
			want: []string{"t.yaml: PeerAuthentication root/p2: spec.selector: a mesh has one mesh-wide PeerAuthentication (no selector, in the root namespace root); t.yaml: PeerAuthentication root/p1 is already one"},
		},
		{
			name: "root namespace is a DNS label",
			docs: []string{"apiVersion: meshlab.dev/v1alpha1\nkind: MeshConfig\nmetadata: {name: m}\nspec: {rootNamespace: Istio_System}\n"},
			want: []string{`t.yaml: MeshConfig default/m: spec.rootNamespace: "Istio_System" is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)`},
		},
		{
			name: "targetRefs as Istio validates them",
			docs: []string{
				ap("both", "  selector: {matchLabels: {app: a}}\n  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: waypoint}]\n"),
				ap("ns", "  targetRefs: [{kind: Service, group: \"\", name: a, namespace: other}]\n"),
				ap("kind", "  targetRef: {kind: Deployment, group: apps, name: a}\n"),
				ap("se", "  targetRefs: [{kind: ServiceEntry, group: networking.istio.io, name: a}]\n"),
				ap("noname", "  targetRefs: [{kind: GatewayClass, group: gateway.networking.k8s.io}]\n"),
				ap("ok", "  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: waypoint}, {kind: Service, name: a}, {kind: GatewayClass, group: gateway.networking.k8s.io, name: istio-waypoint}]\n"),
			},
			want: []string{
				"t.yaml: AuthorizationPolicy default/both: spec: only one of selector, targetRef or targetRefs can be set",
				"t.yaml: AuthorizationPolicy default/ns: spec.targetRefs[0].namespace: must not be set: a policy targets objects of its own namespace (Istio does not support cross-namespace targetRefs)",
				"t.yaml: AuthorizationPolicy default/kind: spec.targetRef: must be to a gateway.networking.k8s.io Gateway or GatewayClass, a core Service or a networking.istio.io ServiceEntry (was apps/Deployment)",
				"t.yaml: AuthorizationPolicy default/noname: spec.targetRefs[0].name: is required",
			},
		},
		{
			name: "unimplemented fields by name",
			docs: []string{ap("p", `  provider: {name: ext}
  rules:
  - from: [{source: {serviceAccounts: [x], requestPrincipals: [x], ipBlocks: [10.0.0.0/8], principals: [a]}}]
    to: [{operation: {hosts: [x], methods: [GET]}}]
`)},
			want: []string{
				"t.yaml: AuthorizationPolicy default/p: spec.rules[0].from[0].source.serviceAccounts: is not supported by meshlab (AuthorizationPolicy supports in rules.from.source: ipBlocks, namespaces, notIpBlocks, notNamespaces, notPrincipals, notRemoteIpBlocks, notRequestPrincipals, principals, remoteIpBlocks, requestPrincipals)",
				"t.yaml: AuthorizationPolicy default/p: spec.rules[0].to[0].operation.hosts: is not supported by meshlab (AuthorizationPolicy supports in rules.to.operation: methods, notMethods, notPaths, notPorts, paths, ports)",
				"t.yaml: AuthorizationPolicy default/p: spec.provider: is not supported by meshlab (AuthorizationPolicy supports here: action, rules, selector, targetRef, targetRefs)",
			},
		},
		{
			name: "AUDIT and CUSTOM",
			docs: []string{ap("p", "  action: AUDIT\n"), ap("q", "  action: CUSTOM\n")},
			want: []string{
				"t.yaml: AuthorizationPolicy default/p: spec.action: AUDIT is not supported by meshlab (ALLOW or DENY)",
				"t.yaml: AuthorizationPolicy default/q: spec.action: CUSTOM is not supported by meshlab (ALLOW or DENY)",
			},
		},
		{
			name: "rules",
			docs: []string{ap("p", `  rules:
  - from: [{}, {source: {}}, {source: {principals: ["", "a*b"], namespaces: ["**"]}}]
    to: [{}, {operation: {}}, {operation: {ports: [http, "0", "70000"], paths: ["/a/{*}"], methods: [""]}}]
    when:
    - {key: source.ip, values: [1.2.3.4, 10.0.0.0/33, x]}
    - {key: "request.headers[]", values: [x]}
    - {key: "", values: [x]}
    - {key: "request.headers[x-a]"}
    - {key: "request.headers[x-b]", notValues: ["a*b"]}
`)},
			want: []string{
				"t.yaml: AuthorizationPolicy default/p: spec.rules[0].from[0].source: is required",
				"t.yaml: AuthorizationPolicy default/p: spec.rules[0].from[1].source: must not be empty (set principals, requestPrincipals, namespaces, ipBlocks, remoteIpBlocks or their not forms)",
				"t.yaml: AuthorizationPolicy default/p: spec.rules[0].from[2].source.principals[0]: must not be empty",
				`t.yaml: AuthorizationPolicy default/p: spec.rules[0].from[2].source.principals[1]: "a*b": "*" is only allowed as the whole value, a prefix or a suffix`,
				`t.yaml: AuthorizationPolicy default/p: spec.rules[0].from[2].source.namespaces[0]: "**": "*" is only allowed as the whole value, a prefix or a suffix`,
				"t.yaml: AuthorizationPolicy default/p: spec.rules[0].to[0].operation: is required",
				"t.yaml: AuthorizationPolicy default/p: spec.rules[0].to[1].operation: must not be empty (set methods, notMethods, paths, notPaths, ports or notPorts)",
				"t.yaml: AuthorizationPolicy default/p: spec.rules[0].to[2].operation.methods[0]: must not be empty",
				`t.yaml: AuthorizationPolicy default/p: spec.rules[0].to[2].operation.paths[0]: "/a/{*}": path templates ({*}, {**}) are not supported by meshlab`,
				`t.yaml: AuthorizationPolicy default/p: spec.rules[0].to[2].operation.ports[0]: "http" is not a port number`,
				"t.yaml: AuthorizationPolicy default/p: spec.rules[0].to[2].operation.ports[1]: 0 is out of range 1-65535",
				"t.yaml: AuthorizationPolicy default/p: spec.rules[0].to[2].operation.ports[2]: 70000 is out of range 1-65535",
				`t.yaml: AuthorizationPolicy default/p: spec.rules[0].when[0].values[1]: "10.0.0.0/33" is not a CIDR range`,
				`t.yaml: AuthorizationPolicy default/p: spec.rules[0].when[0].values[2]: "x" is not an IP address or CIDR range`,
				`t.yaml: AuthorizationPolicy default/p: spec.rules[0].when[1].key: "request.headers[]" is not supported by meshlab (supported keys: request.headers[<name>], request.auth.claims[<name>], request.auth.principal, request.auth.audiences, request.auth.presenter, source.ip, remote.ip)`,
				"t.yaml: AuthorizationPolicy default/p: spec.rules[0].when[2].key: is required",
				"t.yaml: AuthorizationPolicy default/p: spec.rules[0].when[3]: values or notValues is required",
				`t.yaml: AuthorizationPolicy default/p: spec.rules[0].when[4].notValues[0]: "a*b": "*" is only allowed as the whole value, a prefix or a suffix`,
			},
		},
		{
			name: "DestinationRule tls",
			docs: []string{hello, dr(`  host: backend
  trafficPolicy: {tls: {mode: MUTUAL, subjectAltNames: [x]}}
  subsets:
  - {name: v1, labels: {version: v1}, trafficPolicy: {tls: {mode: SIMPLE, caCertificates: ca.pem, credentialName: c, subjectAltNames: [""]}}}
  - {name: v2, labels: {version: v2}, trafficPolicy: {tls: {mode: ISTIO_MUTUAL, sni: x.example, credentialName: c}}}
  - {name: v4, labels: {version: v4}, trafficPolicy: {tls: {mode: MUTUAL, credentialName: client, clientCertificate: /c.pem, privateKey: /k.pem}}}
  - {name: v5, labels: {version: v5}, trafficPolicy: {tls: {mode: SIMPLE, clientCertificate: /c.pem}}}
  - {name: v6, labels: {version: v6}, trafficPolicy: {tls: {mode: MUTUAL, credentialName: client, sni: backend.example, subjectAltNames: [backend.example]}}}
  - {name: v3, labels: {version: v3}, trafficPolicy: {tls: {mode: SIMPLE, sni: backend.example, subjectAltNames: [backend.example], caCertificates: /etc/ca.pem}}}
`)},
			want: []string{
				"t.yaml: DestinationRule default/other: spec.trafficPolicy.tls.credentialName: is required for mode MUTUAL: the name of a Secret holding the client certificate (tls.crt/tls.key, or cert/key) and, to verify the server, its CA (ca.crt or cacert, or the Secret <name>-cacert)",
				`t.yaml: DestinationRule default/other: spec.subsets[0].trafficPolicy.tls.caCertificates: "ca.pem" must be an absolute path (a file on the proxy's filesystem)`,
				"t.yaml: DestinationRule default/other: spec.subsets[0].trafficPolicy.tls.caCertificates: is ignored when credentialName is set (as in Istio): set one of them",
				"t.yaml: DestinationRule default/other: spec.subsets[0].trafficPolicy.tls.subjectAltNames[0]: must not be empty",
				"t.yaml: DestinationRule default/other: spec.subsets[1].trafficPolicy.tls.credentialName: is read with modes SIMPLE and MUTUAL only (the mode here is ISTIO_MUTUAL; ISTIO_MUTUAL uses the mesh's certificates)",
				"t.yaml: DestinationRule default/other: spec.subsets[2].trafficPolicy.tls.clientCertificate: file paths are not read by meshlab: its pods mount no volumes, so the file would be the host's, read by the root agent and handed to the pod's proxy; put the client certificate in a Secret (kubernetes.io/tls, or generic with tls.crt/tls.key/ca.crt) and name it in credentialName, as Istio's egress TLS origination task does",
				"t.yaml: DestinationRule default/other: spec.subsets[2].trafficPolicy.tls.privateKey: file paths are not read by meshlab: its pods mount no volumes, so the file would be the host's, read by the root agent and handed to the pod's proxy; put the client certificate in a Secret (kubernetes.io/tls, or generic with tls.crt/tls.key/ca.crt) and name it in credentialName, as Istio's egress TLS origination task does",
				"t.yaml: DestinationRule default/other: spec.subsets[3].trafficPolicy.tls.clientCertificate: is read with mode MUTUAL only (the mode here is SIMPLE)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load("t.yaml", []byte(docs(tt.docs...)))
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

// The security kinds flow through Apply, Find (with the names Istio users type) and Delete.
func TestScenarioApplySecurity(t *testing.T) {
	t.Parallel()
	base, err := Load("hello.yaml", []byte(helloYAML(t)))
	if err != nil {
		t.Fatal(err)
	}
	strict := pa("istio-system", "default", "  mtls: {mode: STRICT}\n")
	deny := ap("deny", "  action: DENY\n  rules: [{to: [{operation: {methods: [POST]}}]}]\n")
	next, changes, err := base.Apply(File{Name: "sec.yaml", Data: []byte(docs(strict, deny))})
	if err != nil || changeStrings(changes) != "PeerAuthentication istio-system/default created, AuthorizationPolicy default/deny created" {
		t.Fatalf("Apply: %s, %v", changeStrings(changes), err)
	}
	if _, _, err := next.Apply(File{Name: "two.yaml", Data: []byte(pa("istio-system", "another", "  mtls: {mode: DISABLE}\n"))}); err == nil ||
		err.Error() != "sec.yaml: PeerAuthentication istio-system/default: spec.selector: a mesh has one mesh-wide PeerAuthentication (no selector, in the root namespace istio-system); two.yaml: PeerAuthentication istio-system/another is already one" {
		t.Errorf("Apply of a second mesh-wide policy: err = %v", err)
	}
	for _, kind := range []string{"peerauthentication", "peerauthentications", "pa", "PeerAuthentication", "authorizationpolicy", "authorizationpolicies", "ap", "AuthorizationPolicy"} {
		found, err := next.Find(kind, "")
		if err != nil || len(found) != 1 {
			t.Errorf("Find(%q) = %v, %v, want one object", kind, found, err)
		}
	}
	m, err := next.Build(defaultOpts)
	if err != nil || len(m.Istio.PeerAuthentications) != 1 || len(m.Istio.AuthorizationPolicies) != 1 {
		t.Fatalf("Build after Apply: %v", err)
	}
	after, changes, err := next.Delete(Ref{Kind: "pa", Namespace: "istio-system", Name: "default"}, Ref{Kind: "authorizationpolicies", Name: "deny"})
	if err != nil || changeStrings(changes) != "PeerAuthentication istio-system/default deleted, AuthorizationPolicy default/deny deleted" || len(after.Objects) != len(base.Objects) {
		t.Errorf("Delete: %s, %v", changeStrings(changes), err)
	}
	if k := Kinds(); !slices.IsSorted(k) || !slices.Contains(k, "AuthorizationPolicy") || !slices.Contains(k, "PeerAuthentication") {
		t.Errorf("Kinds() = %v", k)
	}
	if _, ok := CanonicalKind("pa"); !ok || model.DefaultRootNamespace != "istio-system" {
		t.Error("CanonicalKind(pa) failed")
	}
}

// TestCanonicalKindGrouped: kubectl's RESOURCE.GROUP and RESOURCE.VERSION.GROUP name the
// kind of that group (the authz-http page's clean-up deletes
// authorizationpolicy.security.istio.io/allow-nothing); a group of another kind names none.
func TestCanonicalKindGrouped(t *testing.T) {
	for in, want := range map[string]string{
		"authorizationpolicy.security.istio.io":    "AuthorizationPolicy",
		"authorizationpolicies.security.istio.io":  "AuthorizationPolicy",
		"peerauthentications.v1.security.istio.io": "PeerAuthentication",
		"gateway.networking.istio.io":              "Gateway",
		"gateways.v1beta1.networking.istio.io":     "Gateway",
		"gateway.gateway.networking.k8s.io":        GatewayAPIGatewayKind,
		"httproutes.gateway.networking.k8s.io":     "HTTPRoute",
		"deployments.apps":                         "Deployment",
		"deployment.v1.apps":                       "Deployment",
		"virtualservices.networking.istio.io":      "VirtualService",
		"authorizationpolicy.networking.istio.io":  "",
		"virtualservice.security.istio.io":         "",
		"bogus.security.istio.io":                  "",
	} {
		got, ok := CanonicalKind(in)
		if got != want || ok != (want != "") {
			t.Errorf("CanonicalKind(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// A policy's istio.io/dry-run reaches the model, where the generator reads it; a policy
// annotated "false" (or not at all) is enforced.
func TestDryRunAnnotationInModel(t *testing.T) {
	t.Parallel()
	dry := "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata:\n  name: deny-path-headers\n  annotations:\n    \"istio.io/dry-run\": \"true\"\nspec: {action: DENY, rules: [{to: [{operation: {paths: [/headers]}}]}]}\n"
	off := "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: enforced, annotations: {istio.io/dry-run: \"false\"}}\nspec: {action: DENY}\n"
	s, err := Load("t.yaml", []byte(docs(helloYAML(t), dry, off, ap("plain", "  {}\n"))))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	m, err := s.Build(defaultOpts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	got := map[string]bool{}
	for _, c := range m.Istio.AuthorizationPolicies {
		got[c.Name] = c.DryRun()
	}
	if want := map[string]bool{"deny-path-headers": true, "enforced": false, "plain": false}; !maps.Equal(got, want) {
		t.Fatalf("dry-run by policy = %v, want %v", got, want)
	}
}

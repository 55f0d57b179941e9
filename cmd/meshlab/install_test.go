package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// install reads istioctl's profiles and Getting Started's IstioOperator file, and refuses
// by name what a lab does not read.
func TestInstallComponents(t *testing.T) {
	t.Parallel()
	noGateways := filepath.Join(testutil.IstioSamples(t), "bookinfo", "demo-profile-no-gateways.yaml")
	for _, tc := range []struct {
		sets, files []string
		want        []string
		err         string
	}{
		{files: []string{noGateways}, want: []string{"core", "istiod"}},
		{sets: []string{"profile=demo"}, want: []string{"core", "istiod", "egress", "ingress"}},
		{want: []string{"core", "istiod", "ingress"}},
		{sets: []string{"profile=ambient"}, want: []string{"core", "istiod", "cni", "ztunnel"}},
		{sets: []string{"profile=minimal"}, want: []string{"core", "istiod"}},
		{sets: []string{"profile=openshift"}, err: `profile "openshift" is not one a lab stands for`},
		{sets: []string{"meshConfig.enablePrometheusMerge=true"}, err: "--set meshConfig.enablePrometheusMerge=true: meshlab's mesh config does not honour meshConfig.enablePrometheusMerge"},
		{sets: []string{"meshConfig.enableTracing=true"}, want: []string{"core", "istiod", "ingress"}},
		{sets: []string{"values.pilot.traceSampling=100"}, err: "values.* and components.* shape a Kubernetes install"},
	} {
		got, _, err := installComponents(tc.sets, tc.files)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v %v: %v, want %q", tc.sets, tc.files, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%v %v: %v %v, want %v", tc.sets, tc.files, got, err, tc.want)
		}
	}
}

// install's meshConfig fields, from --set and an IstioOperator file, over the profile's.
func TestInstallMeshConfig(t *testing.T) {
	t.Parallel()
	iop := filepath.Join(t.TempDir(), "iop.yaml")
	if err := os.WriteFile(iop, []byte("apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  profile: demo\n  meshConfig:\n    accessLogEncoding: JSON\n    outboundTrafficPolicy:\n      mode: REGISTRY_ONLY\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	td := filepath.Join(t.TempDir(), "td-installation.yaml")
	if err := os.WriteFile(td, []byte("apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  meshConfig:\n    trustDomain: new-td\n    trustDomainAliases:\n      - old-td\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sets, files []string
		want        string
	}{
		{sets: []string{"profile=demo"}, want: `{}`},
		{want: `{"accessLogFile":""}`},
		{sets: []string{"meshConfig.accessLogFile=/dev/stdout"}, want: `{"accessLogFile":"/dev/stdout"}`},
		{files: []string{iop}, sets: []string{"meshConfig.accessLogFile=/tmp/a.log"}, want: `{"accessLogEncoding":"JSON","accessLogFile":"/tmp/a.log","outboundTrafficPolicy":{"mode":"REGISTRY_ONLY"}}`},
		// The trust domain migration page's installs.
		{sets: []string{"values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true", "profile=demo", "meshConfig.trustDomain=old-td"}, want: `{"trustDomain":"old-td"}`},
		{files: []string{td}, sets: []string{"profile=demo"}, want: `{"trustDomain":"new-td","trustDomainAliases":["old-td"]}`},
		{sets: []string{"profile=demo", "meshConfig.trustDomain=new-td", "meshConfig.trustDomainAliases[0]=old-td", "meshConfig.trustDomainAliases[1]=older-td"}, want: `{"trustDomain":"new-td","trustDomainAliases":["old-td","older-td"]}`},
	} {
		p, err := readInstall(tc.sets, tc.files)
		if err != nil {
			t.Fatalf("%v %v: %v", tc.sets, tc.files, err)
		}
		got, _ := json.Marshal(p.meshConfig())
		if string(got) != tc.want {
			t.Errorf("%v %v: mesh config %s, want %s", tc.sets, tc.files, got, tc.want)
		}
	}
	// The zipkin page's tracing.yaml: its structured fields go into the mesh config as
	// written, for the MeshConfig loader to check.
	tracing := filepath.Join(t.TempDir(), "tracing.yaml")
	if err := os.WriteFile(tracing, []byte("apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  meshConfig:\n    enableTracing: true\n    defaultConfig:\n      tracing: {} # disable legacy MeshConfig tracing options\n    extensionProviders:\n    - name: zipkin\n      zipkin:\n        service: zipkin.istio-system.svc.cluster.local\n        port: 9411\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := readInstall([]string{"values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true"}, []string{tracing})
	if got, _ := json.Marshal(p.meshConfig()); err != nil || string(got) != `{"accessLogFile":"","defaultConfig":{"tracing":{}},"enableTracing":true,"extensionProviders":[{"name":"zipkin","zipkin":{"port":9411,"service":"zipkin.istio-system.svc.cluster.local"}}]}` {
		t.Errorf("tracing.yaml: mesh config %s, %v", got, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  meshConfig:\n    enablePrometheusMerge: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readInstall(nil, []string{bad}); err == nil || !strings.Contains(err.Error(), "spec.meshConfig.enablePrometheusMerge: meshlab's mesh config does not honour it") {
		t.Errorf("meshConfig.enablePrometheusMerge in a file: %v, want it refused by name", err)
	}
	for _, tc := range []struct {
		sets   []string
		errHas string
	}{
		{sets: []string{"meshConfig.trustDomainAliases=old-td"}, errHas: "--set meshConfig.trustDomainAliases=old-td: meshConfig.trustDomainAliases is a list: set its items as meshConfig.trustDomainAliases[0]=VALUE"},
		{sets: []string{"meshConfig.trustDomainAliases[1]=old-td"}, errHas: "meshConfig.trustDomainAliases has 0 items: set [0] first"},
	} {
		if _, err := readInstall(tc.sets, nil); err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%v: %v, want %q", tc.sets, err, tc.errHas)
		}
	}
	notList := filepath.Join(t.TempDir(), "notlist.yaml")
	if err := os.WriteFile(notList, []byte("apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  meshConfig:\n    trustDomainAliases: old-td\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readInstall(nil, []string{notList}); err == nil || !strings.Contains(err.Error(), "spec.meshConfig.trustDomainAliases: old-td is not a list") {
		t.Errorf("trustDomainAliases not a list: %v", err)
	}
	// -f - reads stdin, as `cat <<EOF | istioctl install -y -f -`.
	in := strings.NewReader("apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  meshConfig:\n    accessLogFile: /dev/stdout\n")
	p, err = readInstallFrom(nil, []string{"-"}, in)
	if got, _ := json.Marshal(p.meshConfig()); err != nil || string(got) != `{"accessLogFile":"/dev/stdout"}` {
		t.Errorf("-f - from stdin: %s, %v", got, err)
	}
}

// FuzzReadInstall: no --set value or IstioOperator file makes install's reader panic, and
// whatever it accepts has a profile it knows and mesh config fields it honours.
func FuzzReadInstall(f *testing.F) {
	f.Add("meshConfig.trustDomain=new-td", "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  meshConfig:\n    trustDomain: new-td\n    trustDomainAliases:\n      - old-td\n")
	f.Add("meshConfig.trustDomainAliases[0]=old-td", "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  profile: demo\n")
	f.Add("meshConfig.trustDomainAliases[7]=x", "kind: IstioOperator\nspec: {meshConfig: {trustDomainAliases: x}}\n")
	f.Add("profile=ambient", "kind: IstioOperator\nspec: {meshConfig: {accessLogFile: [a]}}\n")
	f.Add("profile=default", "kind: IstioOperator\nspec: {components: {ingressGateways: [{name: istio-ingressgateway, k8s: {podAnnotations: {a: b}, env: [{name: E, value: \"1\"}]}}]}}\n")
	f.Fuzz(func(t *testing.T, set, file string) {
		path := filepath.Join(t.TempDir(), "iop.yaml")
		if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := readInstall([]string{set}, []string{path})
		if err != nil {
			return
		}
		if _, ok := installProfiles[p.profile]; !ok {
			t.Fatalf("accepted profile %q", p.profile)
		}
		for k := range p.mesh {
			if !slices.Contains(meshConfigInstallFields, k) || slices.Contains(meshConfigListFields, k) {
				t.Fatalf("accepted mesh field %q", k)
			}
		}
		for k := range p.lists {
			if !slices.Contains(meshConfigListFields, k) {
				t.Fatalf("accepted list field %q", k)
			}
		}
		for name := range p.gatewayK8s {
			if name != "istio-ingressgateway" && name != "istio-egressgateway" {
				t.Fatalf("accepted k8s settings of gateway %q", name)
			}
		}
		if _, err := json.Marshal(installedState(p, time.Unix(0, 0))); err != nil {
			t.Fatalf("installed-state of an accepted install: %v", err)
		}
	})
}

// TestInstallDNSCertificates: the DNS certificates page's IstioOperator, in its
// meshConfig.certificates form and its snips' older values.global.certificates form,
// gives the mesh config's certificates; other values and a malformed list are refused.
func TestInstallDNSCertificates(t *testing.T) {
	t.Parallel()
	const certs = "      - secretName: dns.example1-service-account\n        dnsNames: [example1.istio-system.svc, example1.istio-system]\n"
	const want = `{"accessLogFile":"","certificates":[{"dnsNames":["example1.istio-system.svc","example1.istio-system"],"secretName":"dns.example1-service-account"}]}`
	dir := t.TempDir()
	for _, tc := range []struct{ name, spec, want, errHas string }{
		{name: "meshConfig", spec: "  meshConfig:\n    certificates:\n" + certs, want: want},
		{name: "values.global", spec: "  values:\n    global:\n      certificates:\n        - secretName: dns.example1-service-account\n          dnsNames: [example1.istio-system.svc, example1.istio-system]\n", want: want},
		{name: "other values", spec: "  values:\n    pilot:\n      env: {}\n", errHas: `unknown field "pilot" (meshlab's install reads an IstioOperator's spec.profile, spec.meshConfig, spec.values.global.certificates`},
		{name: "not a list", spec: "  meshConfig:\n    certificates: dns.example1\n", errHas: "spec.meshConfig.certificates"},
		{name: "unknown key", spec: "  meshConfig:\n    certificates:\n      - secretName: a\n        dns: [b]\n", errHas: "spec.meshConfig.certificates"},
	} {
		f := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
		if err := os.WriteFile(f, []byte("apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n"+tc.spec), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := readInstall(nil, []string{f})
		if tc.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.errHas)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got, _ := json.Marshal(p.meshConfig()); string(got) != tc.want {
			t.Errorf("%s: mesh config %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestInstallSecureMetrics: the secure-metrics page's istio-secure-metrics.yaml, as
// written: defaultConfig.proxyMetadata goes into the mesh config, the ingress gateway's
// k8s.podAnnotations into the installed-state the lab makes the gateway from; the k8s
// fields install does not take are refused by name.
func TestInstallSecureMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	page := write("istio-secure-metrics.yaml", `apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  meshConfig:
    defaultConfig:
      proxyMetadata:
        ENVOY_SECURE_METRICS_PORT: "15091"
        ENVOY_SECURE_MERGED_METRICS_PORT: "15092"
        METRICS_LOCALHOST_ACCESS_ONLY: "true"
  components:
    ingressGateways:
    - name: istio-ingressgateway
      enabled: true
      k8s:
        podAnnotations:
          prometheus.istio.io/secure-port: "15092"
          prometheus.io/path: "/stats/prometheus"
`)
	p, err := readInstall(nil, []string{page})
	if err != nil {
		t.Fatalf("the page's IstioOperator: %v", err)
	}
	if got, _ := json.Marshal(p.meshConfig()["defaultConfig"]); string(got) != `{"proxyMetadata":{"ENVOY_SECURE_MERGED_METRICS_PORT":"15092","ENVOY_SECURE_METRICS_PORT":"15091","METRICS_LOCALHOST_ACCESS_ONLY":"true"}}` {
		t.Errorf("mesh config's defaultConfig %s", got)
	}
	state, _ := json.Marshal(installedState(p, time.Unix(0, 0))["spec"])
	if want := `"ingressGateways":[{"enabled":true,"k8s":{"podAnnotations":{"prometheus.io/path":"/stats/prometheus","prometheus.istio.io/secure-port":"15092"}},"name":"istio-ingressgateway"}]`; !strings.Contains(string(state), want) {
		t.Errorf("installed-state:\n%s\nwant %s", state, want)
	}
	for _, tc := range []struct{ k8s, want string }{
		{"resources: {requests: {cpu: 10m}}", `spec.components.ingressGateways[0].k8s: error unmarshaling JSON: while decoding JSON: json: unknown field "resources" (meshlab's install takes a gateway's k8s.podAnnotations and k8s.env`},
		{"env: [{name: A, valueFrom: {fieldRef: {fieldPath: x}}}]", `spec.components.ingressGateways[0].k8s: error unmarshaling JSON: while decoding JSON: json: unknown field "valueFrom"`},
	} {
		f := write("bad.yaml", "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  components:\n    ingressGateways:\n    - name: istio-ingressgateway\n      enabled: true\n      k8s:\n        "+tc.k8s+"\n")
		if _, err := readInstall(nil, []string{f}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("k8s %s: %v, want %q", tc.k8s, err, tc.want)
		}
	}
	other := write("other.yaml", "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  components:\n    ingressGateways:\n    - name: my-gateway\n      enabled: true\n      k8s: {podAnnotations: {a: b}}\n")
	if _, err := readInstall(nil, []string{other}); err == nil || !strings.Contains(err.Error(), `spec.components.ingressGateways[0].k8s: gateway "my-gateway": meshlab makes the gateways istio-ingressgateway and istio-egressgateway only`) {
		t.Errorf("k8s of another gateway: %v", err)
	}
}

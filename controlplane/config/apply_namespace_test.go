package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// curlSample is Istio's curl sample as it is applied with `kubectl apply -n NS -f`: no
// object names a namespace.
const curlSample = `apiVersion: v1
kind: ServiceAccount
metadata: {name: curl}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: curl}
spec:
  selector: {matchLabels: {app: curl}}
  template:
    metadata: {labels: {app: curl}}
    spec:
      serviceAccountName: curl
      containers: [{name: curl, image: curlimages/curl, command: [/bin/sleep, infinity]}]
`

// The mtls-migration task applies one sample to three namespaces with -n: three pods of
// the same name, one per namespace; an object naming another namespace is refused, as
// kubectl refuses it.
func TestApplyWithNamespaceAsKubectl(t *testing.T) {
	t.Parallel()
	sc, err := Load("base.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"foo", "bar", "legacy"} {
		if sc, _, err = sc.Apply(File{Name: "curl.yaml", Data: []byte(curlSample), Namespace: ns}); err != nil {
			t.Fatalf("apply -n %s: %v", ns, err)
		}
	}
	var pods []string
	for _, o := range sc.Objects {
		if o.Origin.Kind == "Deployment" {
			for _, p := range o.pods {
				pods = append(pods, p.Namespace+"/"+p.Name)
			}
		}
	}
	if len(pods) != 3 {
		t.Fatalf("pods %v, want one in each of foo, bar, legacy", pods)
	}
	name := strings.SplitN(pods[0], "/", 2)[1]
	for _, p := range pods {
		if !strings.HasSuffix(p, "/"+name) || !strings.HasPrefix(name, "curl-") {
			t.Fatalf("pods %v: want the same name in every namespace, as Kubernetes' template hash", pods)
		}
	}
	_, _, err = sc.Apply(File{Name: "x.yaml", Data: []byte("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: x, namespace: bar}\n"), Namespace: "foo"})
	if err == nil || !strings.Contains(err.Error(), `x.yaml: ServiceAccount bar/x: metadata.namespace: "bar" does not match the namespace "foo" given with -n`) {
		t.Fatalf("an object of another namespace: %v", err)
	}
	refs, err := Refs("curl.yaml", "legacy", []byte(curlSample))
	if err != nil || len(refs) != 2 || refs[1].Namespace != "legacy" {
		t.Fatalf("delete -n legacy -f curl.yaml: %v %v", refs, err)
	}
}

// The TCP traffic shifting task applies Istio's tcp-echo sample in namespace
// istio-io-tcp-traffic-shifting: pods with keys longer than a short run directory name
// (the run directory cuts them, lab.Paths.PodDir) are accepted, as Kubernetes accepts them.
func TestApplyLongNamespaceAsKubectl(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(testutil.IstioSamples(t), "tcp-echo", "tcp-echo-services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Load("base.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "istio-io-tcp-traffic-shifting"
	if sc, _, err = sc.Apply(File{Name: "tcp-echo-services.yaml", Data: data, Namespace: ns}); err != nil {
		t.Fatalf("apply -n %s: %v", ns, err)
	}
	var keys []string
	for _, o := range sc.Objects {
		for _, p := range o.pods {
			keys = append(keys, p.Key())
		}
	}
	if len(keys) != 2 || len(keys[0]) <= 56 {
		t.Fatalf("pod keys %v: want tcp-echo-v1 and -v2 in %s, longer than the old 56-character limit", keys, ns)
	}
}

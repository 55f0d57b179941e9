package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/internal/testutil"
)

// kube-inject of Istio's sleep sample: the Deployment's pods get istio-init and
// istio-proxy with the injector's record, the other objects pass unchanged, and injecting
// the output again changes nothing (istioctl skips an injected pod).
func TestKubeInjectSleep(t *testing.T) {
	t.Parallel()
	in, err := os.ReadFile(filepath.Join(testutil.IstioSamples(t), "sleep", "sleep.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := kubeInject(bytes.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(strings.TrimSuffix(out.String(), "---\n"), "---\n")
	if len(docs) != 3 {
		t.Fatalf("kube-inject wrote %d documents, want 3 (ServiceAccount, Service, Deployment):\n%s", len(docs), out.String())
	}
	if !strings.Contains(docs[1], "kind: Service\n") || strings.Contains(docs[1], "targetPort") {
		t.Errorf("the Service changed:\n%s", docs[1])
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict([]byte(docs[2]), &d); err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	var names, inits []string
	for _, c := range spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range spec.InitContainers {
		inits = append(inits, c.Name)
	}
	if !slices.Equal(names, []string{"sleep", "istio-proxy"}) || !slices.Equal(inits, []string{"istio-init"}) {
		t.Errorf("containers %v, init containers %v; want [sleep istio-proxy], [istio-init]", names, inits)
	}
	meta := d.Spec.Template.ObjectMeta
	if meta.Labels["security.istio.io/tlsMode"] != "istio" || meta.Labels["service.istio.io/canonical-name"] != "sleep" ||
		!strings.Contains(meta.Annotations["sidecar.istio.io/status"], `"containers":["istio-proxy"]`) ||
		meta.Annotations["kubectl.kubernetes.io/default-container"] != "sleep" {
		t.Errorf("template metadata %+v; want the injector's labels and annotations", meta)
	}
	if img := spec.Containers[1].Image; img != "docker.io/istio/proxyv2:"+injectIstioVersion {
		t.Errorf("proxy image %q", img)
	}
	var again bytes.Buffer
	if err := kubeInject(bytes.NewReader(out.Bytes()), &again); err != nil {
		t.Fatal(err)
	}
	if again.String() != out.String() {
		t.Errorf("injecting twice changed the output:\n%s", again.String())
	}
}

// A pod that opts out of injection is written back without a sidecar.
func TestKubeInjectOptOut(t *testing.T) {
	t.Parallel()
	in := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {sidecar.istio.io/inject: \"false\"}\nspec:\n  containers:\n  - name: app\n    image: nginx\n"
	var out bytes.Buffer
	if err := kubeInject(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "istio-proxy") {
		t.Errorf("an opted-out pod was injected:\n%s", out.String())
	}
}

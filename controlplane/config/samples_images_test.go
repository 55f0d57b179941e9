package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// notPersonas are the images Istio's samples name that meshlab runs no persona for, each
// with why: the addons and infrastructure a lab does not run as images (a pod of one
// runs the demo app, or sleeps, with a note naming the image).
var notPersonas = map[string]string{
	"istio-testing/ext-authz":                        "the ext-authz sample server: not implemented",
	"istio-testing/jwt-server":                       "a JWKS server: the lab's world serves Istio's JWT samples instead",
	"istio/health":                                   "the health-check sample: not implemented",
	"istio/examples-bookinfo-mysqldb":                "Bookinfo's databases: ratings answers without them",
	"istio/examples-bookinfo-mongodb":                "Bookinfo's databases: ratings answers without them",
	"prometheus-operator/prometheus-config-reloader": "an addon's helper container",
	"grafana/loki":                                   "an addon",
	"kiwigrid/k8s-sidecar":                           "an addon's helper container",
	"apache/skywalking-oap-server":                   "an addon",
	"apache/skywalking-ui":                           "an addon",
	"envoyproxy/ratelimit":                           "the rate-limit service: not implemented",
	"redis":                                          "the rate-limit service's store: not implemented",
	"spiffe/spire-server":                            "SPIRE: the lab has its own CA",
	"spiffe/spire-agent":                             "SPIRE: the lab has its own CA",
	"spiffe/spire-controller-manager":                "SPIRE: the lab has its own CA",
	"spiffe/spiffe-csi-driver":                       "SPIRE: the lab has its own CA",
	"sig-storage/csi-node-driver-registrar":          "SPIRE's CSI driver",
	"hiroakis/tornado-websocket-example":             "the websockets sample: not implemented",
}

// Every image Istio's samples name (both docker.io/istio/... and
// registry.istio.io/release/..., tags ignored) selects a persona, or is listed in
// notPersonas with the reason: a new sample image fails here until it is decided.
func TestIstioSampleImagesHavePersonas(t *testing.T) {
	t.Parallel()
	samples := testutil.IstioSamples(t)
	imageLine := regexp.MustCompile(`(?m)^\s*-?\s*image:\s*["']?([^"'\s{}#]+)["']?\s*(#.*)?$`)
	seen := map[string][]string{}
	err := filepath.WalkDir(samples, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !slices.Contains([]string{".yaml", ".yml"}, filepath.Ext(path)) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range imageLine.FindAllStringSubmatch(string(data), -1) {
			rel, _ := filepath.Rel(samples, path)
			seen[m[1]] = append(seen[m[1]], rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 20 {
		t.Fatalf("found %d images in %s: the samples moved?", len(seen), samples)
	}
	used := map[string]bool{}
	for image, files := range seen {
		repo := imageRepository(image)
		if _, ok := imagePersonas[repo]; ok {
			continue
		}
		if _, ok := notPersonas[repo]; ok {
			used[repo] = true
			continue
		}
		t.Errorf("image %s (%s; in %s) selects no persona: add it to imagePersonas, or to notPersonas with the reason", image, repo, strings.Join(files, ", "))
	}
	for repo := range notPersonas {
		if !used[repo] {
			t.Errorf("notPersonas lists %s, which no sample names any more", repo)
		}
	}
	for _, image := range []string{
		"registry.istio.io/release/examples-bookinfo-productpage-v1:1.20.3",
		"registry.istio.io/release/tcp-echo-server:1.3",
		"registry.istio.io/release/examples-helloworld-v2:1.0",
		"registry.istio.io/testing/app:latest",
		"docker.io/mccutchen/go-httpbin:v2.15.0",
	} {
		if imagePersonas[imageRepository(image)] == "" {
			t.Errorf("%s selects no persona", image)
		}
	}
}

package promserver

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// addonConfig is prometheus.yml of Istio's samples/addons/prometheus.yaml ConfigMap.
func addonConfig(t *testing.T) []byte {
	t.Helper()
	return sampleConfig(t, "addons/prometheus.yaml")
}

// sampleConfig is prometheus.yml of the ConfigMap of the sample file rel.
func sampleConfig(t *testing.T, rel string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testutil.IstioSamples(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	for doc := range strings.SplitSeq(string(raw), "\n---\n") {
		var cm struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal([]byte(doc), &cm); err == nil && cm.Kind == "ConfigMap" && cm.Data["prometheus.yml"] != "" {
			return []byte(cm.Data["prometheus.yml"])
		}
	}
	t.Fatalf("no prometheus.yml in samples/%s", rel)
	return nil
}

func TestTranslateAddonConfig(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc/config"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/config/recording_rules.yml"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := Translate(addonConfig(t), "/sd", root)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
		RuleFiles     []string         `json:"rule_files"`
	}
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, job := range cfg.ScrapeConfigs {
		if _, ok := job["kubernetes_sd_configs"]; ok {
			t.Errorf("job %v still has kubernetes_sd_configs", job["job_name"])
		}
		if job["job_name"] == "kubernetes-pods" {
			found = true
			b, _ := json.Marshal(job["file_sd_configs"])
			if !strings.Contains(string(b), `"/sd/pod.json"`) {
				t.Errorf("kubernetes-pods file_sd_configs = %s, want /sd/pod.json", b)
			}
			if rc, _ := job["relabel_configs"].([]any); len(rc) != 12 {
				t.Errorf("kubernetes-pods has %d relabel rules, want the addon's 12 unchanged", len(rc))
			}
		}
	}
	if !found {
		t.Error("no kubernetes-pods job")
	}
	want := filepath.Join(root, "etc/config/recording_rules.yml")
	if cfg.RuleFiles[0] != want || cfg.RuleFiles[1] != "/etc/config/alerting_rules.yml" {
		t.Errorf("rule_files = %v, want %s first and the missing ones as written", cfg.RuleFiles, want)
	}
}

func TestTranslateNamespaces(t *testing.T) {
	in := []byte("scrape_configs:\n- job_name: x\n  kubernetes_sd_configs:\n  - role: pod\n    namespaces:\n      names: [a, b]\n  relabel_configs:\n  - action: drop\n")
	out, err := Translate(in, "/sd", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "regex: a|b") || strings.Index(string(out), "keep") > strings.Index(string(out), "drop") {
		t.Errorf("namespaces not kept first:\n%s", out)
	}
	if _, err := Translate([]byte("scrape_configs:\n- job_name: x\n  kubernetes_sd_configs:\n  - role: cluster\n"), "/sd", "/"); err == nil {
		t.Error("unknown role accepted")
	}
}

func TestPodTargets(t *testing.T) {
	p := &model.Pod{Name: "productpage-v1-6b746f74dc-9stvs", Namespace: "default", IP: netip.MustParseAddr("10.90.0.5"),
		Workload: "productpage-v1", Labels: map[string]string{"app": "productpage", "version": "v1"}, Ports: []uint16{9080}}
	p.Sidecar.Inject = true
	p.Origin.Kind = "Deployment"
	groups := PodTargets([]Pod{FromModel(p, "meshlab", true)})
	if len(groups) != 2 {
		t.Fatalf("%d targets, want the app's 9080 and istio-proxy's 15090: %+v", len(groups), groups)
	}
	g := groups[0]
	if g.Targets[0] != "10.90.0.5:9080" {
		t.Errorf("target %v", g.Targets)
	}
	for k, v := range map[string]string{
		"__meta_kubernetes_pod_annotation_prometheus_io_scrape": "true",
		"__meta_kubernetes_pod_annotation_prometheus_io_port":   "15020",
		"__meta_kubernetes_pod_annotation_prometheus_io_path":   "/stats/prometheus",
		"__meta_kubernetes_pod_label_app":                       "productpage",
		"__meta_kubernetes_pod_label_security_istio_io_tlsMode": "istio",
		"__meta_kubernetes_pod_name":                            p.Name,
		"__meta_kubernetes_namespace":                           "default",
		"__meta_kubernetes_pod_phase":                           "Running",
		"__meta_kubernetes_pod_container_port_number":           "9080",
	} {
		if g.Labels[k] != v {
			t.Errorf("%s = %q, want %q", k, g.Labels[k], v)
		}
	}
	if groups[1].Labels["__meta_kubernetes_pod_container_port_name"] != "http-envoy-prom" {
		t.Errorf("istio-proxy target %+v", groups[1])
	}
	plain := &model.Pod{Name: "sleep", Namespace: "default", IP: netip.MustParseAddr("10.90.0.6"), Workload: "sleep"}
	if g := PodTargets([]Pod{FromModel(plain, "meshlab", true)}); len(g) != 1 || g[0].Targets[0] != "10.90.0.6" || g[0].Labels["__meta_kubernetes_pod_annotation_prometheus_io_scrape"] != "" {
		t.Errorf("a pod without sidecar or ports: %+v", g)
	}
}

// TestTranslateSecureMetricsTLSFiles: the secure-metrics sample's mTLS jobs read the
// certificates of the container's /etc/istio-certs volume below the volume root, where
// the lab binds the emptyDir its sidecar writes; the service account's ca.crt, in no
// volume, stays as written.
func TestTranslateSecureMetricsTLSFiles(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc/istio-certs"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := Translate(sampleConfig(t, "addons/extras/prometheus-secure-metrics.yaml"), "/sd", root)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName   string         `json:"job_name"`
			TLSConfig map[string]any `json:"tls_config"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, j := range cfg.ScrapeConfigs {
		switch j.JobName {
		case "istio-secure-merged-metrics", "istio-secure-envoy-metrics":
			seen++
			for k, name := range map[string]string{"ca_file": "root-cert.pem", "cert_file": "cert-chain.pem", "key_file": "key.pem"} {
				if want := filepath.Join(root, "etc/istio-certs", name); j.TLSConfig[k] != want {
					t.Errorf("job %s: tls_config.%s = %v, want %s", j.JobName, k, j.TLSConfig[k], want)
				}
			}
			if j.TLSConfig["insecure_skip_verify"] != true {
				t.Errorf("job %s: insecure_skip_verify = %v, want it kept", j.JobName, j.TLSConfig["insecure_skip_verify"])
			}
		case "kubernetes-api-servers":
			if want := "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"; j.TLSConfig["ca_file"] != want {
				t.Errorf("job %s: ca_file = %v, want %s as written", j.JobName, j.TLSConfig["ca_file"], want)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("found %d of the sample's 2 mTLS jobs", seen)
	}
}

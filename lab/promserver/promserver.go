// Package promserver runs Istio's Prometheus addon (samples/addons/prometheus.yaml) in a
// lab: Debian's prometheus binary is the addon pod's app, started with the container's
// own arguments on a configuration translated from the addon's ConfigMap. The only
// translation is discovery: a lab has no API server for kubernetes_sd_configs to watch,
// so each of them becomes a file_sd_configs reading a file per role that the lab writes
// from its pods, with the __meta_kubernetes_* labels Kubernetes discovery would give
// them. The addon's relabelling then runs unchanged (docs/ARCHITECTURE.md, "Prometheus").
package promserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Persona is the app persona of the addon's prometheus-server container (image
// prom/prometheus): the lab runs Debian's prometheus for it, not the built-in app.
const Persona = "prometheus"

// Binary is Debian's prometheus on PATH.
func Binary() (string, error) {
	p, err := exec.LookPath("prometheus")
	if err != nil {
		return "", fmt.Errorf("the Prometheus addon needs Debian's prometheus, which is not installed (sudo make prometheus, or apt-get install prometheus): %w", err)
	}
	return p, nil
}

// Dir is a Prometheus pod's directory: its translated configuration, the discovery files
// the lab writes and the TSDB (the pod's emptyDir).
type Dir string

// Config is the translated configuration prometheus is started with.
func (d Dir) Config() string { return filepath.Join(string(d), "prometheus.yml") }

// SD is the directory of the discovery files, one per Kubernetes role.
func (d Dir) SD() string { return filepath.Join(string(d), "sd") }

// Data is the TSDB directory (--storage.tsdb.path).
func (d Dir) Data() string { return filepath.Join(string(d), "data") }

// Roles are kubernetes_sd_configs' roles, each answered by the file SD/<role>.json.
var Roles = []string{"pod", "endpoints", "endpointslice", "service", "node", "ingress"}

// roleFile is the discovery file of a role.
func (d Dir) roleFile(role string) string { return filepath.Join(d.SD(), role+".json") }

// Prepare makes the pod's directory for prometheus running as uid: the configuration
// named by the container's --config.file (read below volumeRoot, where the lab writes the
// pod's ConfigMap volumes) translated, an empty discovery file per role and the data
// directory. It returns the command line: the binary and the container's arguments with
// the configuration and storage paths replaced by the pod's.
func Prepare(d Dir, volumeRoot string, args []string, uid int) ([]string, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	cfgPath := flagValue(args, "config.file")
	if cfgPath == "" {
		cfgPath = "prometheus.yml" // prometheus' default, in its working directory /
	}
	raw, err := os.ReadFile(filepath.Join(volumeRoot, filepath.Clean("/"+cfgPath)))
	if err != nil {
		return nil, fmt.Errorf("prometheus: its configuration %s is not in the pod's volumes: %w", cfgPath, err)
	}
	out, err := Translate(raw, d.SD(), volumeRoot)
	if err != nil {
		return nil, fmt.Errorf("prometheus: %s: %w", cfgPath, err)
	}
	for _, dir := range []string{string(d), d.SD(), d.Data()} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Chown(d.Data(), uid, uid); err != nil {
		return nil, err
	}
	if err := os.Chmod(d.Data(), 0o700); err != nil {
		return nil, err
	}
	if err := writeAtomic(d.Config(), out); err != nil {
		return nil, err
	}
	for _, role := range Roles {
		if _, err := os.Stat(d.roleFile(role)); errors.Is(err, os.ErrNotExist) {
			if err := WriteTargets(d, role, nil); err != nil {
				return nil, err
			}
		}
	}
	argv := []string{bin}
	for _, a := range args {
		switch {
		case isFlag(a, "config.file"), isFlag(a, "storage.tsdb.path"):
			continue
		}
		argv = append(argv, a)
	}
	return append(argv, "--config.file="+d.Config(), "--storage.tsdb.path="+d.Data()), nil
}

// flagValue is the value of --name=value (or -name=value) in args, "" when absent.
func flagValue(args []string, name string) string {
	for i, a := range args {
		for _, p := range []string{"--" + name, "-" + name} {
			if v, ok := strings.CutPrefix(a, p+"="); ok {
				return v
			}
			if a == p && i+1 < len(args) {
				return args[i+1]
			}
		}
	}
	return ""
}

func isFlag(a, name string) bool {
	return strings.HasPrefix(a, "--"+name+"=") || strings.HasPrefix(a, "-"+name+"=")
}

// Translate rewrites a Prometheus configuration for a lab: every kubernetes_sd_configs
// entry of a scrape job becomes a file_sd_configs entry reading sdDir/<role>.json (an
// entry limited to namespaces also gets a keep rule on __meta_kubernetes_namespace ahead
// of the job's own relabelling); rule_files that exist below volumeRoot, and a job's
// tls_config files whose directory does (a volume of the container, as the
// secure-metrics sample's /etc/istio-certs, which its sidecar fills later), are read
// from there. Everything else is kept as written.
func Translate(raw []byte, sdDir, volumeRoot string) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return nil, err
	}
	jobs, _ := cfg["scrape_configs"].([]any)
	for _, j := range jobs {
		job, ok := j.(map[string]any)
		if !ok {
			continue
		}
		sds, ok := job["kubernetes_sd_configs"].([]any)
		if !ok {
			continue
		}
		delete(job, "kubernetes_sd_configs")
		var files []any
		var keep []any
		for _, s := range sds {
			sd, _ := s.(map[string]any)
			role, _ := sd["role"].(string)
			if !slices.Contains(Roles, role) {
				return nil, fmt.Errorf("job %v: kubernetes_sd_configs role %q is not one of %s", job["job_name"], role, strings.Join(Roles, ", "))
			}
			files = append(files, map[string]any{"files": []any{filepath.Join(sdDir, role+".json")}, "refresh_interval": "30s"})
			if ns, ok := sd["namespaces"].(map[string]any); ok {
				if names, ok := ns["names"].([]any); ok && len(names) > 0 {
					var alts []string
					for _, n := range names {
						alts = append(alts, fmt.Sprint(n))
					}
					keep = append(keep, map[string]any{"action": "keep", "source_labels": []any{"__meta_kubernetes_namespace"}, "regex": strings.Join(alts, "|")})
				}
			}
		}
		job["file_sd_configs"] = files
		if len(keep) > 0 {
			rc, _ := job["relabel_configs"].([]any)
			job["relabel_configs"] = append(keep, rc...)
		}
	}
	for _, j := range jobs {
		if job, ok := j.(map[string]any); ok {
			volumeTLSFiles(job, volumeRoot)
		}
	}
	if rules, ok := cfg["rule_files"].([]any); ok {
		for i, r := range rules {
			s, _ := r.(string)
			if s == "" || !filepath.IsAbs(s) {
				continue
			}
			if _, err := os.Stat(filepath.Join(volumeRoot, s)); err == nil {
				rules[i] = filepath.Join(volumeRoot, s)
			}
		}
	}
	return yaml.Marshal(cfg)
}

// TargetGroup is one entry of a file_sd file.
type TargetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// WriteTargets replaces the discovery file of role with groups, atomically (prometheus
// watches the directory and reads the file whole).
func WriteTargets(d Dir, role string, groups []TargetGroup) error {
	if groups == nil {
		groups = []TargetGroup{}
	}
	b, err := json.MarshalIndent(groups, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(d.roleFile(role), append(b, '\n'))
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// volumeTLSFiles points the ca_file, cert_file and key_file of a job's tls_config at
// their place below volumeRoot when their directory is there (a mount of the
// container's volumes); others, as the service account's ca.crt, stay as written.
func volumeTLSFiles(job map[string]any, volumeRoot string) {
	tc, ok := job["tls_config"].(map[string]any)
	if !ok {
		return
	}
	for _, k := range []string{"ca_file", "cert_file", "key_file"} {
		s, _ := tc[k].(string)
		if s == "" || !filepath.IsAbs(s) {
			continue
		}
		p := filepath.Join(volumeRoot, filepath.Clean(s))
		if fi, err := os.Stat(filepath.Dir(p)); err == nil && fi.IsDir() && filepath.Dir(p) != filepath.Clean(volumeRoot) {
			tc[k] = p
		}
	}
}

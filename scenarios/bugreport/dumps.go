package bugreport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DumpFile is the name istioctl gives a proxy's Envoy config dump in the report
// (proxies/<namespace>/<pod>/config_dump?include_eds: the admin endpoint it read).
const DumpFile = "config_dump?include_eds"

// KeptDir is where a lab made from a bug report keeps the report's proxy dumps, under
// its run directory, in the report's own layout (proxies/<namespace>/<pod>/DumpFile).
// down removes them with the run directory.
const KeptDir = "bug-report"

// maxKeptBytes bounds the dumps a lab keeps together; a report of a large cluster holds
// hundreds of proxies' dumps. Past it the remaining proxies' dumps are not kept (a note
// says which).
const maxKeptBytes = 256 << 20

// isK8sName reports whether s is a namespace or pod name as Kubernetes allows it (a DNS
// subdomain: lower-case letters, digits, '-' and '.', alphanumeric at both ends, at most
// 253 characters): the only names that become directories under the lab's run
// directory.
func isK8sName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || i == len(s)-1 || (c != '-' && c != '.')) {
			return false
		}
	}
	return true
}

// dumpPath is the report's path of the dump of proxy "<namespace>/<pod>".
func dumpPath(proxy string) string { return "proxies/" + proxy + "/" + DumpFile }

// KeepDumps writes the report's proxy dumps under runDir/KeptDir, readable by root
// only (a dump names the cluster's addresses and certificates' serials), and returns
// the proxies kept.
func (r *Report) KeepDumps(runDir string) ([]string, error) {
	var kept []string
	for _, proxy := range sortedMapKeys(r.Dumps) {
		p := filepath.Join(runDir, KeptDir, filepath.FromSlash(dumpPath(proxy)))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return kept, fmt.Errorf("keep the bug report's dumps: %w", err)
		}
		if err := os.WriteFile(p, r.Dumps[proxy], 0o600); err != nil {
			return kept, fmt.Errorf("keep the bug report's dumps: %w", err)
		}
		kept = append(kept, proxy)
	}
	return kept, nil
}

// KeptProxies lists the "<namespace>/<pod>" of the proxies whose dumps the lab whose run
// directory is runDir keeps (none when it was not made from a bug report).
func KeptProxies(runDir string) ([]string, error) {
	root := filepath.Join(runDir, KeptDir, "proxies")
	var out []string
	nss, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, ns := range nss {
		pods, err := os.ReadDir(filepath.Join(root, ns.Name()))
		if err != nil {
			return nil, err
		}
		for _, pod := range pods {
			if _, err := os.Stat(filepath.Join(root, ns.Name(), pod.Name(), DumpFile)); err == nil {
				out = append(out, ns.Name()+"/"+pod.Name())
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// KeptDump reads the kept dump of proxy "<namespace>/<pod>".
func KeptDump(runDir, proxy string) ([]byte, error) {
	return os.ReadFile(filepath.Join(runDir, KeptDir, filepath.FromSlash(dumpPath(proxy))))
}

// MatchProxy chooses, among the kept proxies, the cluster's pod that a lab pod stands
// for: the one of the same namespace and name, else the cluster's pods of the lab pod's
// workload (its name, a dash, then one or two generated parts, as a Deployment's,
// DaemonSet's or StatefulSet's pods are named), the first by name when there are
// several. The error lists what is kept.
func MatchProxy(kept []string, namespace, name, workload string) (string, error) {
	if slices.Contains(kept, namespace+"/"+name) {
		return namespace + "/" + name, nil
	}
	if workload != "" {
		for _, k := range kept {
			ns, pod, _ := strings.Cut(k, "/")
			rest, ok := strings.CutPrefix(pod, workload+"-")
			if ns == namespace && ok && rest != "" && strings.Count(rest, "-") <= 1 {
				return k, nil
			}
		}
	}
	if len(kept) == 0 {
		return "", fmt.Errorf("the lab keeps no proxy dump of a bug report (up --from-bug-report keeps the report's proxies/*/%s)", DumpFile)
	}
	return "", fmt.Errorf("the bug report holds no dump of pod %s/%s nor of its workload %q (it holds: %s); choose one with --against=cluster/<namespace>/<pod>",
		namespace, name, workload, strings.Join(kept, ", "))
}

// Dump types: the type URLs an Envoy config dump's dynamic resources are compared by,
// with where each section keeps them.
var dumpSections = []struct {
	section, typeURL string
	list             string   // the section's list of dynamic resources
	path             []string // the resource within one element of the list
}{
	{"type.googleapis.com/envoy.admin.v3.ListenersConfigDump", "type.googleapis.com/envoy.config.listener.v3.Listener", "dynamic_listeners", []string{"active_state", "listener"}},
	{"type.googleapis.com/envoy.admin.v3.RoutesConfigDump", "type.googleapis.com/envoy.config.route.v3.RouteConfiguration", "dynamic_route_configs", []string{"route_config"}},
	{"type.googleapis.com/envoy.admin.v3.ClustersConfigDump", "type.googleapis.com/envoy.config.cluster.v3.Cluster", "dynamic_active_clusters", []string{"cluster"}},
	{"type.googleapis.com/envoy.admin.v3.EndpointsConfigDump", "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", "dynamic_endpoint_configs", []string{"endpoint_config"}},
}

// DumpResources reads an Envoy config dump (the admin /config_dump's JSON) as the
// resources a control plane sent: the active dynamic listeners, route configurations,
// clusters and endpoints, by type URL and resource name, each as generic JSON without
// its "@type". The bootstrap's static resources and the secrets (each side's own
// certificates) are left out.
func DumpResources(data []byte) (map[string]map[string]any, error) {
	var dump struct {
		Configs []map[string]any `json:"configs"`
	}
	if err := json.Unmarshal(data, &dump); err != nil {
		return nil, fmt.Errorf("not an Envoy config dump: %w", err)
	}
	out := map[string]map[string]any{}
	for _, c := range dump.Configs {
		for _, s := range dumpSections {
			if c["@type"] != s.section {
				continue
			}
			items, _ := c[s.list].([]any)
			res := out[s.typeURL]
			if res == nil {
				res = map[string]any{}
				out[s.typeURL] = res
			}
			for _, it := range items {
				v := it
				for _, k := range s.path {
					m, _ := v.(map[string]any)
					v = m[k]
				}
				m, ok := v.(map[string]any)
				if !ok {
					continue // a warming or failed listener: no active state
				}
				delete(m, "@type")
				name, _ := m["name"].(string)
				if name == "" {
					name, _ = m["cluster_name"].(string)
				}
				res[name] = m
			}
		}
	}
	return out, nil
}

// Package bugreport reads what `istioctl bug-report` writes (its .tar.gz, or the
// directory it extracts to) as a meshlab scenario, for `meshlab up --from-bug-report`.
//
// istioctl's archive (tools/bug-report in Istio) holds, under bug-report/:
//
//	versions                       istioctl's and the control plane's versions
//	cluster/k8s-cluster-resources  kubectl get nodes,namespaces,crds,webhooks -o yaml (one List)
//	cluster/k8s-resources          kubectl get -A all,jobs,ingresses,endpointslices,configmaps,networkpolicies -o yaml
//	cluster/crs                    kubectl get -A <every CRD> -o yaml: Istio's and others' objects
//	cluster/secrets                kubectl get secrets -A (a table; YAML with --full-secrets)
//	cluster/pods                   the Istio namespace's pods, -o yaml
//	cluster/events, nodes, ...     read by people, not by meshlab
//	istio/<ns>/<pod>/debug/<...>   istiod's debug endpoints (debug/mesh: its mesh config)
//	proxies/<ns>/<pod>/<...>       each proxy's admin output (config_dump?include_eds, clusters...)
//
// The scenario is the cluster's objects as kubectl printed them (the loader takes Lists,
// status and the cluster's machinery: controlplane/config/clusterdump.go), in the order
// namespaces, resources, custom resources, then a MeshConfig made of the istio ConfigMap's
// mesh: the fields meshlab implements are kept, the ones that change nothing a lab runs
// are ignored with one note each, and every other field is left for the loader to refuse
// by name. Read changes nothing anywhere; Locate names the archive's file in the loader's
// errors.
package bugreport

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/controlplane/config"
)

// Report is a bug report read as a scenario.
type Report struct {
	// Source is the archive or directory as given; the scenario's file name in messages.
	Source string
	// Scenario is the lab's scenario: the report's object files as documents, then the
	// mesh config.
	Scenario []byte
	// IstioVersion is the version of the cluster's istiod ("" when the report names
	// none) and VersionFrom the file that said so.
	IstioVersion, VersionFrom string
	// ServiceCIDR is the /16 holding every Service address of the report when there is
	// one (invalid otherwise): the lab range that keeps the cluster's VIPs.
	ServiceCIDR netip.Prefix
	// Proxies are the namespace/pod of each proxy whose admin output the report holds.
	Proxies []string
	// Dumps are the proxies' Envoy config dumps (DumpFile), by namespace/pod: the
	// cluster's config of each proxy, which KeepDumps keeps beside the lab.
	Dumps map[string][]byte
	// Notes are one line each: what was read, skipped or ignored.
	Notes []string

	parts []part // the Scenario's documents, by file
}

// part is a stretch of the Scenario's documents that came from one file of the report.
type part struct {
	file       string // path under the report's root
	first, len int    // 1-based index of its first document in Scenario, and how many
	// mesh is set on the generated MeshConfig document: errors on it are the
	// ConfigMap's.
	mesh *meshSource
}

// meshSource names where the mesh config came from.
type meshSource struct {
	kind, namespace, name, field string
}

// objectFiles are the report's files read as objects, in the scenario's order.
var objectFiles = []string{"cluster/k8s-cluster-resources", marker, "cluster/crs", "cluster/secrets"}

// Read reads the bug report at src (a .tar.gz, a tar, or a directory).
func Read(src string) (*Report, error) {
	fs, err := readArchive(src)
	if err != nil {
		return nil, fmt.Errorf("--from-bug-report %s: %w", src, err)
	}
	r := &Report{Source: src, Proxies: fs.proxies}
	var b strings.Builder
	doc := 1
	add := func(p part, text string) {
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		p.first = doc
		p.len = 1 + countSeparators(text)
		doc += p.len
		b.WriteString("---\n")
		b.WriteString(text)
		r.parts = append(r.parts, p)
	}
	for _, f := range objectFiles {
		data, ok := fs.data[f]
		if !ok {
			if f != "cluster/secrets" && f != "cluster/crs" {
				r.note("%s: not in the report", f)
			}
			continue
		}
		if f == "cluster/secrets" && !looksLikeYAMLObjects(data) {
			r.note("%s: kubectl's table (the report was made without --full-secrets): no Secret is in the lab; gateways' credentials must be applied", f)
			continue
		}
		if strings.TrimSpace(string(data)) == "" {
			continue
		}
		add(part{file: f}, string(data))
		r.note("%s: read", f)
	}
	mesh, src2, err := r.meshConfig(fs)
	if err != nil {
		return nil, err
	}
	if mesh != nil {
		js, err := json.Marshal(mesh)
		if err != nil {
			return nil, fmt.Errorf("--from-bug-report %s: mesh config: %w", src, err)
		}
		add(part{file: src2.file, mesh: src2.meshSource}, string(js))
	}
	r.Scenario = []byte(b.String())
	if len(r.Scenario) > config.MaxFileBytes {
		return nil, fmt.Errorf("--from-bug-report %s: its objects weigh %d MiB together, above the %d MiB of one scenario", src, len(r.Scenario)>>20, config.MaxFileBytes>>20)
	}
	r.IstioVersion, r.VersionFrom = istioVersion(fs)
	r.Dumps = r.proxyDumps(fs)
	r.ServiceCIDR = serviceRange(fs.data[marker])
	return r, nil
}

func (r *Report) note(format string, args ...any) {
	r.Notes = append(r.Notes, "bug-report: "+fmt.Sprintf(format, args...))
}

// proxyDumps returns the report's proxy dumps whose namespace and pod are Kubernetes
// names (read up to about maxKeptBytes together); a note names the ones left out.
func (r *Report) proxyDumps(fs *files) map[string][]byte {
	out := map[string][]byte{}
	for _, proxy := range fs.proxies {
		data, ok := fs.data[dumpPath(proxy)]
		if !ok {
			continue
		}
		ns, pod, _ := strings.Cut(proxy, "/")
		if !isK8sName(ns) || !isK8sName(pod) {
			r.note("%s: not a Kubernetes namespace/pod name: its dump is not kept", dumpPath(proxy))
			continue
		}
		out[proxy] = data
	}
	for _, f := range fs.unkept {
		r.note("%s: past %d MiB of proxy dumps: not kept", f, maxKeptBytes>>20)
	}
	return out
}

// countSeparators counts the lines of text that start a YAML document, as the loader
// splits them (controlplane/config's isSeparator).
func countSeparators(text string) int {
	n := 0
	for l := range strings.SplitSeq(text, "\n") {
		if rest, ok := strings.CutPrefix(l, "---"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\r') {
			n++
		}
	}
	return n
}

// looksLikeYAMLObjects tells kubectl's YAML (apiVersion/kind/items at the top) from its
// table output (a NAMESPACE NAME TYPE... header).
func looksLikeYAMLObjects(data []byte) bool {
	for l := range strings.SplitSeq(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || l == "---" {
			continue
		}
		return strings.HasPrefix(l, "apiVersion:") || strings.HasPrefix(l, "kind:") || strings.HasPrefix(l, "items:") || strings.HasPrefix(l, "{")
	}
	return false
}

// Locate rewrites the loader's errors on the report's scenario so that each names the
// report's file and its document within it (and the ConfigMap field for the mesh
// config), and returns err. Other errors are returned as they are.
func (r *Report) Locate(err error) error {
	var list config.ErrorList
	if !errors.As(err, &list) {
		var one *config.Error
		if !errors.As(err, &one) {
			return err
		}
		list = config.ErrorList{one}
	}
	for _, e := range list {
		if e.Origin.File != r.Source {
			continue
		}
		for _, p := range r.parts {
			if e.Doc < p.first || e.Doc >= p.first+p.len {
				continue
			}
			e.Origin.File = r.Source + ": " + p.file
			e.Doc = e.Doc - p.first + 1
			if p.mesh != nil {
				if p.mesh.kind != "" {
					e.Origin.Kind, e.Origin.Namespace, e.Origin.Name = p.mesh.kind, p.mesh.namespace, p.mesh.name
				}
				rest := strings.TrimPrefix(strings.TrimPrefix(e.Field, "spec"), ".")
				e.Field = strings.TrimPrefix(p.mesh.field+"."+rest, ".")
				if rest == "" {
					e.Field = p.mesh.field
				}
			}
			break
		}
	}
	return err
}

// versionRE finds a BuildInfo's version in istioctl's versions file.
var versionRE = regexp.MustCompile(`Version:\s*"([^"]+)"`)

// istioVersion returns the cluster's istiod version: the control plane's in the versions
// file, else the tag of istiod's discovery container in the Istio namespace's pods.
func istioVersion(fs *files) (string, string) {
	if v := fs.data["versions"]; v != nil {
		text := string(v)
		if _, cp, ok := strings.Cut(text, "control plane revisions/versions"); ok {
			cp, _, _ = strings.Cut(cp, "proxy revisions/versions")
			if m := versionRE.FindStringSubmatch(cp); m != nil {
				return m[1], "versions"
			}
		}
	}
	for _, f := range []string{"cluster/pods", marker} {
		for _, it := range listItems(fs.data[f]) {
			h := headerOf(it)
			if h.kind != "Pod" && h.kind != "Deployment" {
				continue
			}
			for _, c := range containersOf(it) {
				name, _ := c["name"].(string)
				image, _ := c["image"].(string)
				if name != "discovery" || !strings.Contains(image, "pilot") {
					continue
				}
				ref, _, _ := strings.Cut(image, "@")
				if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
					return ref[i+1:], f + " (image " + image + ")"
				}
			}
		}
	}
	return "", ""
}

// serviceRange returns the /16 holding every Service clusterIP of the resources file
// when one does (the kind and kubeadm clusters' 10.96.0.0/12 is used from its start).
func serviceRange(data []byte) netip.Prefix {
	var p netip.Prefix
	for _, it := range listItems(data) {
		if headerOf(it).kind != "Service" {
			continue
		}
		spec, _ := it["spec"].(map[string]any)
		ip, _ := spec["clusterIP"].(string)
		a, err := netip.ParseAddr(ip)
		if err != nil || !a.Is4() {
			continue
		}
		q, _ := a.Prefix(16)
		if p.IsValid() && p != q {
			return netip.Prefix{}
		}
		p = q
	}
	return p
}

type header struct{ apiVersion, kind, namespace, name string }

func headerOf(top map[string]any) header {
	meta, _ := top["metadata"].(map[string]any)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	return header{str(top, "apiVersion"), str(top, "kind"), str(meta, "namespace"), str(meta, "name")}
}

// listItems parses a kubectl List and returns its items that are objects; nil when data
// is not one.
func listItems(data []byte) []map[string]any {
	if data == nil {
		return nil
	}
	var top struct {
		Items []any `json:"items"`
	}
	if yaml.Unmarshal(data, &top) != nil {
		return nil
	}
	var out []map[string]any
	for _, it := range top.Items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// containersOf returns a Pod's or a workload's pod template's containers.
func containersOf(obj map[string]any) []map[string]any {
	spec, _ := obj["spec"].(map[string]any)
	if tmpl, ok := spec["template"].(map[string]any); ok {
		spec, _ = tmpl["spec"].(map[string]any)
	}
	cs, _ := spec["containers"].([]any)
	var out []map[string]any
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// sortedMapKeys returns m's keys in order.
func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

package agent

import (
	"bytes"
	_ "embed" // the bootstrap template
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"text/template"
	"unicode/utf8"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// meshID is Istio's MESH_ID of a single-cluster mesh, the trust domain's name.
const meshID = "cluster.local"

// bootstrapTemplateText is the bootstrap as a text/template, as pilot-agent's
// envoy_bootstrap.json is. Rendering it costs a fraction of building the typed proto and
// marshalling it with protojson (which, in a fresh agent process, first builds the
// reflection tables of every message type the bootstrap names: a third of the agent's
// start CPU when it did; docs/BENCHMARKS.md, "100 pods").
//
//go:embed envoy_bootstrap.json
var bootstrapTemplateText string

// bootstrapTemplate is the parsed template, parsed on first use.
var bootstrapTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("envoy_bootstrap.json").
		Option("missingkey=error").
		Funcs(template.FuncMap{"json": jsonValue}).
		Parse(bootstrapTemplateText))
})

// bootstrapParams are the template's option values (pilot-agent's pkg/bootstrap options).
type bootstrapParams struct {
	NodeID    string
	Cluster   string
	Metadata  string // the node metadata as a JSON object, indented to its place
	XDSSocket string
	SDSSocket string

	AdminPort      uint16
	StatusPort     uint16
	PrometheusPort uint16
	HealthPort     uint16

	// SecureMetricsPort and SecureMergedMetricsPort are pilot-agent's
	// ENVOY_SECURE_METRICS_PORT and ENVOY_SECURE_MERGED_METRICS_PORT (0: no such listener);
	// MetricsLocalhostOnly is METRICS_LOCALHOST_ACCESS_ONLY, which binds 15090 to
	// 127.0.0.1.
	SecureMetricsPort, SecureMergedMetricsPort uint16
	MetricsLocalhostOnly                       bool
	// ZipkinHost and ZipkinPort are defaultConfig.tracing.zipkin.address: the
	// bootstrap's tracing.http (Envoy's Zipkin tracer) reports to the STRICT_DNS
	// cluster "zipkin" of that address, as Istio's envoy_bootstrap.json; "" for none.
	ZipkinHost string
	ZipkinPort uint16

	// Waypoint is Istio's waypoint bootstrap (pkg/bootstrap/config.go for a "waypoint~"
	// node): delta ADS, and the bootstrap extensions metadata_discovery (WDS Workload
	// over ADS) and envoy.bootstrap.internal_listener (64 KiB buffers).
	Waypoint bool
}

// renderBootstrap returns the bootstrap of one epoch as Envoy's JSON, shaped as Istio's
// envoy_bootstrap.json (with its sds-grpc cluster). c must have its defaults applied.
// It is a pure function of c: the epoch only names the file.
func renderBootstrap(c Config) ([]byte, error) {
	md, err := nodeMetadataJSON(c)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct{ name, v string }{
		{"node id", c.NodeID}, {"service cluster", c.ServiceCluster}, {"xds socket", c.XDSSocket}, {"run dir", c.RunDir},
	} {
		if !utf8.ValidString(f.v) {
			return nil, fmt.Errorf("render bootstrap: %s %q is not valid UTF-8", f.name, f.v)
		}
	}
	zhost, zport, err := zipkinAddress(c.ZipkinAddress, c.HostIP)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Grow(len(bootstrapTemplateText) + len(md))
	err = bootstrapTemplate().Execute(&out, bootstrapParams{
		ZipkinHost:     zhost,
		ZipkinPort:     zport,
		NodeID:         c.NodeID,
		Cluster:        c.ServiceCluster,
		Metadata:       md,
		XDSSocket:      c.XDSSocket,
		SDSSocket:      SDSSocketPath(c.RunDir),
		AdminPort:      c.AdminPort,
		StatusPort:     c.StatusPort,
		PrometheusPort: PrometheusPort,
		HealthPort:     HealthPort,
		Waypoint:       c.proxyType() == ProxyTypeWaypoint,

		SecureMetricsPort:       c.SecureMetricsPort,
		SecureMergedMetricsPort: c.SecureMergedMetricsPort,
		MetricsLocalhostOnly:    c.MetricsLocalhostOnly,
	})
	if err != nil {
		return nil, fmt.Errorf("render bootstrap: %w", err)
	}
	return out.Bytes(), nil
}

// zipkinAddress splits the tracer's host:port as pilot-agent's addressConverter does
// ("" for no tracer), refusing what is not one; a host "$(HOST_IP)" becomes hostIP when
// it is set (pilot-agent's HOST_IP; unset, the host stays as written, as there).
func zipkinAddress(addr, hostIP string) (string, uint16, error) {
	if addr == "" {
		return "", 0, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("render bootstrap: unable to parse zipkin address %q: %w", addr, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 || host == "" || !utf8.ValidString(host) {
		return "", 0, fmt.Errorf("render bootstrap: zipkin address %q: want host:port with a port 1-65535", addr)
	}
	if host == hostIPVariable && hostIP != "" {
		host = hostIP
	}
	return host, uint16(p), nil
}

// hostIPVariable is the tracer host pilot-agent replaces with its HOST_IP: Kubernetes
// would have expanded it in the container's arguments, where tracer addresses used to
// be, but not in the mesh config istiod now hands over.
const hostIPVariable = "$(HOST_IP)"

// jsonValue is the template's json function: v as a JSON value, without HTML escaping
// (protojson, which Envoy's JSON follows, does not escape <, > and &).
func jsonValue(v any) (string, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte{'\n'})), nil
}

// nodeMetadataJSON is Istio's node metadata subset that meshlab fills, as the JSON object
// the template places under node (keys sorted, as protojson writes a Struct).
func nodeMetadataJSON(c Config) (string, error) {
	// encoding/json would quietly turn invalid UTF-8 into U+FFFD where protojson (and
	// Envoy) refuse it: refuse it here, naming the value.
	for _, k := range sortedKeys(c.Labels) {
		if !utf8.ValidString(k) || !utf8.ValidString(c.Labels[k]) {
			return "", fmt.Errorf("build node metadata: label %q=%q is not valid UTF-8", k, c.Labels[k])
		}
	}
	md := nodeMetadata(c)
	for _, k := range []string{"NAMESPACE", "NAME", "SERVICE_ACCOUNT", "WORKLOAD_NAME"} {
		if s := md[k].(string); !utf8.ValidString(s) {
			return "", fmt.Errorf("build node metadata: %s %q is not valid UTF-8", k, s)
		}
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("    ", "  ")
	if err := e.Encode(md); err != nil {
		return "", fmt.Errorf("build node metadata: %w", err)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte{'\n'})), nil
}

// nodeMetadata is Istio's node metadata subset that meshlab fills.
func nodeMetadata(c Config) map[string]any {
	labels := make(map[string]any, len(c.Labels)+2)
	for k, v := range c.Labels {
		labels[k] = v
	}
	// Istio's injector labels every pod with its canonical service and revision, which
	// istio-proxy's peer metadata and istio.stats read from LABELS.
	name, rev := canonicalService(c.Labels, c.Workload)
	labels[canonicalNameLabel], labels[canonicalRevisionLabel] = name, rev
	md := map[string]any{
		"NAMESPACE":             c.Namespace,
		"NAME":                  c.Pod,
		"LABELS":                labels,
		"SERVICE_ACCOUNT":       c.ServiceAccount,
		"INSTANCE_IPS":          c.PodIP.String(),
		"MESH_ID":               meshID,
		"INTERCEPTION_MODE":     "REDIRECT",
		"ENVOY_PROMETHEUS_PORT": PrometheusPort,
		"ENVOY_STATUS_PORT":     HealthPort,
		"WORKLOAD_NAME":         c.Workload,
		"ISTIO_VERSION":         "meshlab",
		// CLUSTER_ID is istiod's cluster name for a single-cluster mesh; the peer
		// filters and istio.stats report it as source_cluster/destination_cluster.
		"CLUSTER_ID": clusterID,
	}
	// pilot-agent's node metadata carries the secure ports, by which istiod keeps a
	// Sidecar's ingress listener off them.
	if c.SecureMetricsPort != 0 {
		md["ENVOY_SECURE_METRICS_PORT"] = c.SecureMetricsPort
	}
	if c.SecureMergedMetricsPort != 0 {
		md["ENVOY_SECURE_MERGED_METRICS_PORT"] = c.SecureMergedMetricsPort
	}
	if c.Workload != "" {
		md["OWNER"] = "kubernetes://apis/apps/v1/namespaces/" + c.Namespace + "/deployments/" + c.Workload
	}
	return md
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Istio's canonical service labels and its single cluster's id.
const (
	canonicalNameLabel     = "service.istio.io/canonical-name"
	canonicalRevisionLabel = "service.istio.io/canonical-revision"
	clusterID              = "Kubernetes"
)

// canonicalService returns the canonical service name and revision Istio's injector
// derives from a pod's labels: its own canonical labels, else app.kubernetes.io/name or
// app (else the workload name), and app.kubernetes.io/version or version (else "latest").
func canonicalService(labels map[string]string, workload string) (name, revision string) {
	name = firstLabel(labels, canonicalNameLabel, "app.kubernetes.io/name", "app")
	if name == "" {
		name = workload
	}
	revision = firstLabel(labels, canonicalRevisionLabel, "app.kubernetes.io/version", "version")
	if revision == "" {
		revision = "latest"
	}
	return name, revision
}

func firstLabel(labels map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := labels[k]; v != "" {
			return v
		}
	}
	return ""
}

// overrideBootstrap merges the override js into the rendered bootstrap as Istio's custom
// bootstrap does (mergeBootstrapOverride), checks the result against the Bootstrap's
// field rules and renders it again with protojson. Only a pod with an override pays for
// the typed round trip.
func overrideBootstrap(rendered []byte, js string) ([]byte, error) {
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(rendered, &b); err != nil {
		return nil, fmt.Errorf("parse rendered bootstrap: %w", err)
	}
	if err := mergeBootstrapOverride(&b, js); err != nil {
		return nil, err
	}
	if err := b.ValidateAll(); err != nil {
		return nil, fmt.Errorf("validate bootstrap: %w", err)
	}
	return marshalBootstrap(&b)
}

// marshalBootstrap renders b as indented JSON with Envoy's proto field names. protojson's
// own whitespace is deliberately unstable, so it is normalised with json.Indent.
func marshalBootstrap(b *bootstrapv3.Bootstrap) ([]byte, error) {
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("marshal bootstrap: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, fmt.Errorf("indent bootstrap: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// writeBootstrap writes epoch's bootstrap to c.bootstrapPath(epoch), mode 0644 because
// the proxy runs as uid 1337 and must read it. The file is replaced atomically.
func writeBootstrap(c Config, epoch int) (string, error) {
	data, err := renderBootstrap(c)
	if err != nil {
		return "", err
	}
	if c.BootstrapOverride != "" {
		if data, err = overrideBootstrap(data, c.BootstrapOverride); err != nil {
			return "", err
		}
	}
	path := c.bootstrapPath(epoch)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", fmt.Errorf("write bootstrap: %w", err)
	}
	// WriteFile honours the umask; the proxy's uid needs read access regardless.
	if err := os.Chmod(tmp, 0o644); err != nil {
		return "", fmt.Errorf("chmod bootstrap: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("rename bootstrap: %w", err)
	}
	return path, nil
}

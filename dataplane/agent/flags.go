package agent

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Flag names of `meshlab agent`; Args and BindFlags are the only users.
const (
	flagLab                      = "lab"
	flagPod                      = "pod"
	flagNamespace                = "namespace"
	flagPodIP                    = "pod-ip"
	flagNodeID                   = "node-id"
	flagServiceCluster           = "service-cluster"
	flagWorkload                 = "workload"
	flagLabel                    = "label"
	flagServiceAccount           = "service-account"
	flagRunDir                   = "run-dir"
	flagXDSSocket                = "xds-socket"
	flagLabSocket                = "lab-socket"
	flagProxyPath                = "proxy-path"
	flagMeshlabPath              = "meshlab-path"
	flagProxyUID                 = "proxy-uid"
	flagProxyGID                 = "proxy-gid"
	flagBaseID                   = "base-id"
	flagLogLevel                 = "proxy-log-level"
	flagConcurrency              = "concurrency"
	flagDataPlane                = "data-plane"
	flagBootstrapOverride        = "bootstrap-override"
	flagDrainDuration            = "drain-duration"
	flagParentShutdownDuration   = "parent-shutdown-duration"
	flagTerminationDrainDuration = "termination-drain-duration"
	flagAdminPort                = "admin-port"
	flagStatusPort               = "status-port"
	flagDNSPort                  = "dns-port"
	flagTokenPath                = "token-path"
	flagCertTTL                  = "cert-ttl"
	flagTrustDomain              = "trust-domain"
	flagSystemCAFile             = "system-ca-file"
	flagVolumeRoot               = "volume-root"
	flagOutputCerts              = "output-certs"
	flagSecureMetricsPort        = "secure-metrics-port"
	flagSecureMergedMetricsPort  = "secure-merged-metrics-port"
	flagMetricsLocalhostOnly     = "metrics-localhost-only"
	flagAppMetricsPort           = "app-metrics-port"
	flagAppMetricsPath           = "app-metrics-path"
	flagProxyless                = "proxyless"
	flagAppUID                   = "app-uid"
	flagZipkinAddress            = "zipkin-address"
	flagHostIP                   = "host-ip"
)

// Args returns the argv after "meshlab agent" that makes BindFlags (and ParseProxyArgs,
// for the positional `proxy TYPE` at the end) produce c again.
// Zero fields are left out (they mean "default"); labels are sorted, one --label each.
func Args(c Config) []string {
	var a []string
	str := func(name, v string) {
		if v != "" {
			a = append(a, "--"+name+"="+v)
		}
	}
	num := func(name string, v uint64) {
		if v != 0 {
			a = append(a, "--"+name+"="+strconv.FormatUint(v, 10))
		}
	}
	dur := func(name string, v time.Duration) {
		if v != 0 {
			a = append(a, "--"+name+"="+v.String())
		}
	}
	str(flagLab, c.Lab)
	str(flagPod, c.Pod)
	str(flagNamespace, c.Namespace)
	if c.PodIP.IsValid() {
		str(flagPodIP, c.PodIP.String())
	}
	str(flagNodeID, c.NodeID)
	str(flagServiceCluster, c.ServiceCluster)
	str(flagWorkload, c.Workload)
	for _, k := range slices.Sorted(maps.Keys(c.Labels)) {
		a = append(a, "--"+flagLabel+"="+k+"="+c.Labels[k])
	}
	str(flagServiceAccount, c.ServiceAccount)
	str(flagRunDir, c.RunDir)
	str(flagXDSSocket, c.XDSSocket)
	str(flagLabSocket, c.LabSocket)
	str(flagProxyPath, c.ProxyPath)
	str(flagMeshlabPath, c.MeshlabPath)
	num(flagProxyUID, uint64(c.ProxyUID))
	num(flagProxyGID, uint64(c.ProxyGID))
	num(flagBaseID, uint64(c.BaseID))
	str(flagLogLevel, c.LogLevel)
	if c.Concurrency != 0 {
		a = append(a, "--"+flagConcurrency+"="+strconv.Itoa(c.Concurrency))
	}
	str(flagDataPlane, c.DataPlane)
	str(flagBootstrapOverride, c.BootstrapOverride)
	dur(flagDrainDuration, c.DrainDuration)
	dur(flagParentShutdownDuration, c.ParentShutdownDuration)
	// Always written: zero is meaningful here (no wait), unlike the other durations.
	a = append(a, "--"+flagTerminationDrainDuration+"="+c.TerminationDrainDuration.String())
	num(flagAdminPort, uint64(c.AdminPort))
	num(flagStatusPort, uint64(c.StatusPort))
	num(flagDNSPort, uint64(c.DNSPort))
	str(flagTokenPath, c.TokenPath)
	dur(flagCertTTL, c.CertTTL)
	str(flagTrustDomain, c.TrustDomain)
	str(flagVolumeRoot, c.VolumeRoot)
	str(flagOutputCerts, c.OutputCerts)
	num(flagSecureMetricsPort, uint64(c.SecureMetricsPort))
	num(flagSecureMergedMetricsPort, uint64(c.SecureMergedMetricsPort))
	if c.MetricsLocalhostOnly {
		a = append(a, "--"+flagMetricsLocalhostOnly)
	}
	str(flagSystemCAFile, c.SystemCAFile)
	num(flagAppMetricsPort, uint64(c.AppMetricsPort))
	str(flagAppMetricsPath, c.AppMetricsPath)
	str(flagZipkinAddress, c.ZipkinAddress)
	str(flagHostIP, c.HostIP)
	if c.Proxyless {
		a = append(a, "--"+flagProxyless)
	}
	num(flagAppUID, uint64(c.AppUID))
	if c.ProxyType != "" {
		a = append(a, "proxy", c.ProxyType) // pilot-agent's `proxy TYPE`; ParseProxyArgs reads it
	}
	return a
}

// BindFlags defines the flags of `meshlab agent` on fs and returns the function that,
// after fs is parsed, turns them into a Config (parsing the pod IP and the labels).
// It does not apply defaults or check required fields; Run does.
func BindFlags(fs *pflag.FlagSet) func() (Config, error) {
	var (
		c      Config
		podIP  string
		labels []string
	)
	fs.StringVar(&c.Lab, flagLab, "", "lab name (required)")
	fs.StringVar(&c.Pod, flagPod, "", "pod name (required)")
	fs.StringVar(&c.Namespace, flagNamespace, "", "pod namespace (required)")
	fs.StringVar(&podIP, flagPodIP, "", "pod IP address (required)")
	fs.StringVar(&c.NodeID, flagNodeID, "", "xDS node id, e.g. sidecar~10.244.0.3~backend-v1.default~default.svc.cluster.local (required)")
	fs.StringVar(&c.ServiceCluster, flagServiceCluster, "", "service cluster, e.g. backend.default (required)")
	fs.StringVar(&c.Workload, flagWorkload, "", "workload name")
	fs.StringArrayVar(&labels, flagLabel, nil, "pod label key=value (repeatable)")
	fs.StringVar(&c.ServiceAccount, flagServiceAccount, "", "service account (required)")
	fs.StringVar(&c.RunDir, flagRunDir, "", "pod run directory (required)")
	fs.StringVar(&c.XDSSocket, flagXDSSocket, "", "path of the lab's ADS unix socket (required)")
	fs.StringVar(&c.LabSocket, flagLabSocket, "", "path of the lab API unix socket (required)")
	fs.StringVar(&c.ProxyPath, flagProxyPath, "", "envoy binary (default $MESHLAB_ENVOY, envoy on PATH, else meshlab proxy)")
	fs.StringVar(&c.MeshlabPath, flagMeshlabPath, "", "binary providing `proxy` when there is no envoy (default this binary)")
	fs.Uint32Var(&c.ProxyUID, flagProxyUID, 0, "proxy uid (0 = 1337)")
	fs.Uint32Var(&c.ProxyGID, flagProxyGID, 0, "proxy gid (0 = 1337)")
	fs.Uint32Var(&c.BaseID, flagBaseID, 0, "the proxy's --base-id")
	fs.StringVar(&c.LogLevel, flagLogLevel, "", "proxy log level (default info)")
	fs.IntVar(&c.Concurrency, flagConcurrency, 0, "proxy worker threads (0 = 2)")
	fs.StringVar(&c.DataPlane, flagDataPlane, "", "data plane: envoy (required) or meshlab (the built-in proxy); default: envoy when one is found")
	fs.StringVar(&c.BootstrapOverride, flagBootstrapOverride, "", "JSON fragment of an Envoy Bootstrap merged into the generated one")
	fs.DurationVar(&c.DrainDuration, flagDrainDuration, 0, "proxy --drain-time-s (0 = 45s)")
	fs.DurationVar(&c.ParentShutdownDuration, flagParentShutdownDuration, 0, "proxy --parent-shutdown-time-s (0 = 60s)")
	fs.DurationVar(&c.TerminationDrainDuration, flagTerminationDrainDuration, DefaultTerminationDrainDuration, "wait after draining on shutdown before stopping the proxy (Istio's terminationDrainDuration)")
	fs.Uint16Var(&c.AdminPort, flagAdminPort, 0, "proxy admin port (0 = 15000)")
	fs.Uint16Var(&c.StatusPort, flagStatusPort, 0, "agent status port (0 = 15020)")
	fs.Uint16Var(&c.DNSPort, flagDNSPort, 0, "DNS proxy port (0 = 15053)")
	fs.StringVar(&c.TokenPath, flagTokenPath, "", "the pod's CA token file; when set, get a workload certificate and serve SDS on sds.sock")
	fs.DurationVar(&c.CertTTL, flagCertTTL, 0, "workload certificate lifetime to ask the CA for (0 = the CA's default)")
	fs.StringVar(&c.TrustDomain, flagTrustDomain, "", "trust domain of the workload's SPIFFE ID (default cluster.local)")
	fs.StringVar(&c.SystemCAFile, flagSystemCAFile, "", "the pod's system trust bundle (PEM), served over SDS as file-root:system (default the host's)")
	fs.StringVar(&c.VolumeRoot, flagVolumeRoot, "", "directory holding the proxy container's volume files at their container paths; file-cert: and file-root: secrets are read there first")
	fs.Uint16Var(&c.AppMetricsPort, flagAppMetricsPort, 0, "port of the app's own Prometheus metrics, merged into the status port's /stats/prometheus (0: none)")
	fs.StringVar(&c.OutputCerts, flagOutputCerts, "", "directory to write the workload's key.pem, cert-chain.pem and root-cert.pem to, as pilot-agent's OUTPUT_CERTS (the lab's directory for the container's)")
	fs.StringVar(&c.AppMetricsPath, flagAppMetricsPath, "", "path of the app's own Prometheus metrics (with --app-metrics-port)")
	fs.Uint16Var(&c.SecureMetricsPort, flagSecureMetricsPort, 0, "mTLS listener of the proxy's stats, as ENVOY_SECURE_METRICS_PORT (0: none)")
	fs.Uint16Var(&c.SecureMergedMetricsPort, flagSecureMergedMetricsPort, 0, "mTLS listener of the merged metrics, as ENVOY_SECURE_MERGED_METRICS_PORT (0: none)")
	fs.BoolVar(&c.MetricsLocalhostOnly, flagMetricsLocalhostOnly, false, "the proxy's 15090 on 127.0.0.1 and the status port's metrics for the pod's loopback only, as METRICS_LOCALHOST_ACCESS_ONLY")
	fs.StringVar(&c.ZipkinAddress, flagZipkinAddress, "", "host:port of the Zipkin collector (the pod's proxy config's tracing.zipkin.address): the bootstrap's tracer (none when empty)")
	fs.StringVar(&c.HostIP, flagHostIP, "", "the pod's host IP (pilot-agent's HOST_IP, status.hostIP): replaces a zipkin address's host $(HOST_IP)")
	fs.BoolVar(&c.Proxyless, flagProxyless, false, "proxyless gRPC (Istio's grpc-agent template): no proxy; write the gRPC bootstrap and certificate files, relay xDS on a socket for the app")
	fs.Uint32Var(&c.AppUID, flagAppUID, 0, "the app's uid, owner of the key file and XDS socket in proxyless mode")
	return func() (Config, error) {
		out := c
		if podIP != "" {
			ip, err := netip.ParseAddr(podIP)
			if err != nil {
				return Config{}, fmt.Errorf("parse --%s: %w", flagPodIP, err)
			}
			out.PodIP = ip
		}
		if len(labels) > 0 {
			out.Labels = make(map[string]string, len(labels))
			for _, l := range labels {
				k, v, err := parseLabel(l)
				if err != nil {
					return Config{}, fmt.Errorf("parse --%s: %w", flagLabel, err)
				}
				out.Labels[k] = v
			}
		}
		return out, nil
	}
}

// parseLabel splits "key=value"; the key must be non-empty, the value may be empty or
// contain '='.
func parseLabel(s string) (key, value string, err error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", fmt.Errorf("label %q is not key=value", s)
	}
	if k == "" {
		return "", "", fmt.Errorf("label %q has an empty key", s)
	}
	return k, v, nil
}

package agent

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"
)

// Defaults applied by Run to the zero fields of a Config.
const (
	DefaultProxyUID                 = 1337
	DefaultProxyGID                 = 1337
	DefaultLogLevel                 = "info"
	DefaultConcurrency              = 2
	DefaultDrainDuration            = 45 * time.Second
	DefaultParentShutdownDuration   = 60 * time.Second
	DefaultTerminationDrainDuration = 5 * time.Second
	DefaultAdminPort                = 15000
	DefaultStatusPort               = 15020
	DefaultDNSPort                  = 15053

	// PrometheusPort and HealthPort are the proxy's static listeners in the bootstrap
	// (Istio's ENVOY_PROMETHEUS_PORT and ENVOY_STATUS_PORT).
	PrometheusPort = 15090
	HealthPort     = 15021
)

// Config is everything one pod's agent needs. Zero optional fields take the defaults
// above; ProxyUID and ProxyGID 0 also mean 1337, so the proxy never runs as root.
type Config struct {
	Lab       string     // required
	Pod       string     // required
	Namespace string     // required
	PodIP     netip.Addr // required
	NodeID    string     // required, e.g. "sidecar~10.244.0.3~backend-v1.default~default.svc.cluster.local"
	// ProxyType is optional: pilot-agent's `proxy TYPE` (sidecar, router or waypoint). ""
	// takes the node id's type; when set, the node id's type must be the same.
	ProxyType      string
	ServiceCluster string            // required, e.g. "backend.default"
	Workload       string            // optional
	Labels         map[string]string // optional
	ServiceAccount string            // required
	RunDir         string            // required: the pod run dir (bootstrap, agent.sock, proxy.log)
	XDSSocket      string            // required: path of the lab's ADS unix socket
	LabSocket      string            // required: path of the lab API unix socket (name table)
	ProxyPath      string            // optional: envoy binary; "" = $MESHLAB_ENVOY, envoy on PATH, else MeshlabPath proxy
	MeshlabPath    string            // optional: binary providing `proxy` when no envoy; "" = os.Executable()
	ProxyUID       uint32            // optional: default 1337
	ProxyGID       uint32            // optional: default 1337
	BaseID         uint32            // optional: the pod's own --base-id (unique per pod on the machine)
	LogLevel       string            // optional: proxy log level, default "info"
	Concurrency    int               // optional: proxy worker threads, default 2
	DataPlane      string            // optional: DataPlaneChoiceEnvoy or DataPlaneChoiceMeshlab; "" = discovery
	// BootstrapOverride is optional: a JSON Bootstrap fragment merged into the bootstrap.
	BootstrapOverride string
	// TokenPath is optional: the pod's CA token file. When set, the agent gets a workload
	// certificate from the CA on XDSSocket and serves it over SDS on sds.sock.
	TokenPath string
	// CertTTL is optional: the certificate lifetime to ask for; 0 = the CA's default.
	CertTTL time.Duration
	// TrustDomain is optional: the trust domain of the SPIFFE ID, default cluster.local.
	TrustDomain string
	// SystemCAFile is optional: the pod's system trust bundle (PEM), what its image's
	// /etc/ssl/certs would hold, served over SDS as "file-root:system"; "" = the host's.
	SystemCAFile string
	// VolumeRoot is optional: the directory holding the istio-proxy container's volume
	// files (the pod's sidecar.istio.io/userVolume, written by the lab) at their
	// container paths below it; the certificate files a "file-cert:" or "file-root:"
	// secret names are read there first, as pilot-agent reads them in its container.
	VolumeRoot string
	// OutputCerts is optional: the directory the agent writes the workload's key.pem,
	// cert-chain.pem and root-cert.pem to, and again at each renewal, as pilot-agent does
	// for OUTPUT_CERTS (the lab's directory standing for the istio-proxy container's,
	// an emptyDir the app may mount too); "" = none.
	OutputCerts string
	// SecureMetricsPort and SecureMergedMetricsPort are optional: pilot-agent's
	// ENVOY_SECURE_METRICS_PORT (Envoy's stats) and ENVOY_SECURE_MERGED_METRICS_PORT (the
	// merged metrics of the status port), mTLS listeners of the bootstrap that ask for a
	// client certificate of the mesh; 0 = none.
	SecureMetricsPort, SecureMergedMetricsPort uint16
	// MetricsLocalhostOnly is optional: METRICS_LOCALHOST_ACCESS_ONLY, the proxy's 15090
	// bound to 127.0.0.1 and the status port's /stats/prometheus refused (403) to any
	// client but the pod's loopback, as pilot-agent does.
	MetricsLocalhostOnly bool

	// ZipkinAddress is optional: the pod's proxy config's tracing.zipkin.address
	// (host:port; its proxy.istio.io/config, else the mesh's defaultConfig), from which
	// the bootstrap gets Envoy's Zipkin tracer and its STRICT_DNS cluster "zipkin", as
	// pilot-agent writes them; "" for no tracer.
	ZipkinAddress string
	// HostIP is optional: the pod's host IP, pilot-agent's HOST_IP (the downward API's
	// status.hostIP), which replaces a ZipkinAddress host written "$(HOST_IP)" as
	// pilot-agent's addressConverter does (a collector on each node, the DaemonSet way).
	HostIP string

	// AppMetricsPort and AppMetricsPath are optional: where the app serves its own
	// Prometheus metrics (the pod's prometheus.io/port and prometheus.io/path annotations,
	// which Istio's injector hands pilot-agent as ISTIO_PROMETHEUS_ANNOTATIONS); the
	// agent's merged metrics on the status port add them. Port 0: no app metrics.
	AppMetricsPort uint16
	AppMetricsPath string

	// Proxyless is optional: the pod is injected with Istio's grpc-agent template, and the
	// agent runs no proxy (proxyless.go). It requires TokenPath.
	Proxyless bool
	// AppUID is optional (proxyless only): the app's uid, which owns the key file and the
	// XDS socket; 0 leaves them root's.
	AppUID uint32

	DrainDuration            time.Duration // optional: --drain-time-s, default 45s
	ParentShutdownDuration   time.Duration // optional: --parent-shutdown-time-s, default 60s
	TerminationDrainDuration time.Duration // optional: wait after drain_listeners on shutdown; 0 = no wait (the flag defaults to 5s, as Istio)

	AdminPort  uint16 // optional: proxy admin on 127.0.0.1, default 15000
	StatusPort uint16 // optional: agent readiness, default 15020
	DNSPort    uint16 // optional: DNS proxy on 127.0.0.1, default 15053
}

// withDefaults returns c with every zero optional field set to its default.
func (c Config) withDefaults() Config {
	if c.ProxyUID == 0 {
		c.ProxyUID = DefaultProxyUID
	}
	if c.ProxyGID == 0 {
		c.ProxyGID = DefaultProxyGID
	}
	if c.LogLevel == "" {
		c.LogLevel = DefaultLogLevel
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.DrainDuration == 0 {
		c.DrainDuration = DefaultDrainDuration
	}
	if c.ParentShutdownDuration == 0 {
		c.ParentShutdownDuration = DefaultParentShutdownDuration
	}
	if c.AdminPort == 0 {
		c.AdminPort = DefaultAdminPort
	}
	if c.StatusPort == 0 {
		c.StatusPort = DefaultStatusPort
	}
	if c.DNSPort == 0 {
		c.DNSPort = DefaultDNSPort
	}
	if c.TrustDomain == "" {
		c.TrustDomain = DefaultTrustDomain
	}
	return c
}

// validate reports every missing required field and every impossible value.
func (c Config) validate() error {
	var errs []error
	for _, f := range []struct{ name, v string }{
		{"lab", c.Lab}, {"pod", c.Pod}, {"namespace", c.Namespace}, {"node id", c.NodeID},
		{"service cluster", c.ServiceCluster}, {"service account", c.ServiceAccount},
		{"run dir", c.RunDir}, {"xds socket", c.XDSSocket}, {"lab socket", c.LabSocket},
	} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("%s is required", f.name))
		}
	}
	if !c.PodIP.IsValid() {
		errs = append(errs, errors.New("pod ip is required"))
	}
	if err := c.checkProxyType(); err != nil {
		errs = append(errs, err)
	}
	if c.Proxyless && c.TokenPath == "" {
		errs = append(errs, errors.New("token path is required in proxyless mode (the app's certificate files)"))
	}
	if c.CertTTL < 0 {
		errs = append(errs, fmt.Errorf("cert ttl %s is negative", c.CertTTL))
	}
	if c.TerminationDrainDuration < 0 {
		errs = append(errs, fmt.Errorf("termination drain duration %s is negative", c.TerminationDrainDuration))
	}
	// Concurrency, the drain durations, the data plane choice and the bootstrap override.
	if err := validateSettings(c.settings()); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("validate agent config: %w", err)
	}
	return nil
}

// bootstrapPath is where epoch's bootstrap is written.
func (c Config) bootstrapPath(epoch int) string {
	return filepath.Join(c.RunDir, "envoy-rev"+strconv.Itoa(epoch)+".json")
}

// SocketPath returns the path of the agent API socket in runDir.
func SocketPath(runDir string) string { return filepath.Join(runDir, "agent.sock") }

// proxyLogPath is where the proxy's stdout and stderr are appended.
func (c Config) proxyLogPath() string { return filepath.Join(c.RunDir, "proxy.log") }

// seconds renders d as whole seconds for Envoy's *-time-s flags, rounding up so that a
// sub-second duration never becomes 0.
func seconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(s, 10)
}

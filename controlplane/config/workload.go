package config

// Workload is meshlab's pod template (apiVersion meshlab.dev/v1alpha1): the pods it
// makes, their labels and identity, and what runs in them.
type Workload struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   ObjectMeta   `json:"metadata"`
	Spec       WorkloadSpec `json:"spec"`
}

// ObjectMeta is the part of Kubernetes' object metadata a Workload uses.
type ObjectMeta struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"` // optional; "default"
	// Labels are accepted for familiarity; pods take their labels from spec.labels.
	// Annotations are the pods' annotations, as a Kubernetes pod template's:
	// inject.istio.io/templates: grpc-agent makes the pods proxyless gRPC.
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// WorkloadSpec describes a Workload's pods.
type WorkloadSpec struct {
	// Replicas is the number of pods (optional, default 1, at most 256). One pod is
	// named after the workload; several are named <name>-0 ... <name>-<N-1>.
	Replicas *int `json:"replicas,omitempty"`
	// Labels are the pods' labels, matched by Service selectors.
	Labels map[string]string `json:"labels,omitempty"`
	// ServiceAccount gives the pods' identity (optional, default "default").
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// Ports are the container ports the app listens on.
	Ports []int `json:"ports,omitempty"`
	// App configures the built-in demo app, which runs unless Command is set.
	App *AppConfig `json:"app,omitempty"`
	// Command is run instead of the demo app (argv, no shell); exclusive with App.
	Command []string `json:"command,omitempty"`
	// Sidecar holds the proxy settings (optional).
	Sidecar *SidecarConfig `json:"sidecar,omitempty"`
}

// AppConfig configures the built-in demo app.
type AppConfig struct {
	// Upstreams are URLs the app calls, in order, on each request to "/".
	Upstreams []string `json:"upstreams,omitempty"`
	// StartupCalls are URLs the app calls once, in order, when it starts, reporting the
	// outcome in its answers ("startup"): without holdApplicationUntilProxyStarts they
	// show the race between the app and its sidecar.
	StartupCalls []string `json:"startupCalls,omitempty"`
	// ErrorRate is the fraction of requests the app fails, 0 to 1 (optional).
	ErrorRate float64 `json:"errorRate,omitempty"`
	// ErrorCode is the status of those failures, 200-599 (optional, default 500).
	ErrorCode int `json:"errorCode,omitempty"`
	// Latency delays every answer, as a Go duration such as "100ms" (optional).
	Latency string `json:"latency,omitempty"`
}

// SidecarConfig holds a Workload's proxy settings, as Istio's sidecar annotations do.
type SidecarConfig struct {
	// Inject reports whether the pods get a sidecar and capture rules (default true).
	Inject *bool `json:"inject,omitempty"`
	// HoldApplicationUntilProxyStarts delays the app until the proxy is ready.
	HoldApplicationUntilProxyStarts bool `json:"holdApplicationUntilProxyStarts,omitempty"`
	// LogLevel is the proxy's log level (default info).
	LogLevel string `json:"logLevel,omitempty"`
	// ProxyPath pins the pods' Envoy binary (an absolute path); default: the lab's
	// --envoy-path, else the agent's discovery.
	ProxyPath string `json:"proxyPath,omitempty"`
	// Concurrency is the proxy's worker threads (optional, default 2).
	Concurrency int `json:"concurrency,omitempty"`
	// DrainDuration and ParentShutdownDuration are Go durations such as "45s" for the
	// proxy's --drain-time-s and --parent-shutdown-time-s (optional, 45s and 60s).
	DrainDuration          string `json:"drainDuration,omitempty"`
	ParentShutdownDuration string `json:"parentShutdownDuration,omitempty"`
	// DataPlane is "envoy" (an Envoy binary is required) or "meshlab" (the built-in
	// proxy); default: Envoy when one is found, else the built-in proxy.
	DataPlane string `json:"dataPlane,omitempty"`
	// BootstrapOverride is a fragment of an Envoy Bootstrap (YAML or JSON, proto field
	// names) merged into the generated bootstrap, as Istio's custom bootstrap.
	BootstrapOverride map[string]any `json:"bootstrapOverride,omitempty"`
}

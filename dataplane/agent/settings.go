package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ProxySettings are the pod's proxy settings that live in the proxy's command line or
// bootstrap, so that changing one takes a new epoch. They are what PUT /proxy-config on
// agent.sock takes and GET /proxy-config answers.
type ProxySettings struct {
	LogLevel               string   `json:"logLevel"`               // proxy --log-level
	Concurrency            int      `json:"concurrency"`            // proxy --concurrency
	DrainDuration          Duration `json:"drainDuration"`          // proxy --drain-time-s
	ParentShutdownDuration Duration `json:"parentShutdownDuration"` // proxy --parent-shutdown-time-s
	// ProxyPath is the Envoy binary; "" lets the agent discover one (see resolveProxy).
	ProxyPath string `json:"proxyPath"`
	// DataPlane chooses the data plane: DataPlaneChoiceEnvoy, DataPlaneChoiceMeshlab, or
	// "" for the agent's discovery (see resolveProxy).
	DataPlane string `json:"dataPlane,omitempty"`
	// BootstrapOverride is a JSON fragment of envoy.config.bootstrap.v3.Bootstrap merged
	// into the generated bootstrap with proto.Merge, as Istio's custom bootstrap.
	BootstrapOverride string `json:"bootstrapOverride,omitempty"`
}

// Data plane choices of ProxySettings.DataPlane.
const (
	DataPlaneChoiceEnvoy   = "envoy"   // an Envoy binary is required
	DataPlaneChoiceMeshlab = "meshlab" // always the built-in `meshlab proxy`
)

// Duration is a time.Duration that reads and writes JSON as a Go duration string ("45s").
type Duration time.Duration

// MarshalJSON writes d as "45s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string, or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if nerr := json.Unmarshal(b, &n); nerr != nil {
			return fmt.Errorf("parse duration %s: want a string like \"45s\"", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("parse duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// proxyLogLevels are Envoy's --log-level values.
var proxyLogLevels = []string{"trace", "debug", "info", "warning", "warn", "error", "critical", "off"}

// validate reports every impossible value in s. Zero values are valid: they mean the
// defaults.
func (s ProxySettings) validate() error {
	var errs []error
	if s.LogLevel != "" && !contains(proxyLogLevels, s.LogLevel) {
		errs = append(errs, fmt.Errorf("log level %q is not one of %s", s.LogLevel, strings.Join(proxyLogLevels, ", ")))
	}
	if s.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("concurrency %d is negative", s.Concurrency))
	}
	if s.DrainDuration < 0 {
		errs = append(errs, fmt.Errorf("drain duration %s is negative", time.Duration(s.DrainDuration)))
	}
	if s.ParentShutdownDuration < 0 {
		errs = append(errs, fmt.Errorf("parent shutdown duration %s is negative", time.Duration(s.ParentShutdownDuration)))
	}
	if s.DataPlane != "" && s.DataPlane != DataPlaneChoiceEnvoy && s.DataPlane != DataPlaneChoiceMeshlab {
		errs = append(errs, fmt.Errorf("data plane %q is not %q or %q", s.DataPlane, DataPlaneChoiceEnvoy, DataPlaneChoiceMeshlab))
	}
	if s.DataPlane == DataPlaneChoiceMeshlab && s.ProxyPath != "" {
		errs = append(errs, fmt.Errorf("proxy path %q needs data plane %q, not %q", s.ProxyPath, DataPlaneChoiceEnvoy, s.DataPlane))
	}
	if s.BootstrapOverride != "" {
		if _, err := parseBootstrapOverride(s.BootstrapOverride); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("validate proxy settings: %w", err)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// withDefaults returns s with zero fields set to the agent's defaults.
func (s ProxySettings) withDefaults() ProxySettings {
	if s.LogLevel == "" {
		s.LogLevel = DefaultLogLevel
	}
	if s.Concurrency == 0 {
		s.Concurrency = DefaultConcurrency
	}
	if s.DrainDuration == 0 {
		s.DrainDuration = Duration(DefaultDrainDuration)
	}
	if s.ParentShutdownDuration == 0 {
		s.ParentShutdownDuration = Duration(DefaultParentShutdownDuration)
	}
	return s
}

// settings returns the proxy settings in c.
func (c Config) settings() ProxySettings {
	return ProxySettings{
		LogLevel: c.LogLevel, Concurrency: c.Concurrency, DrainDuration: Duration(c.DrainDuration),
		ParentShutdownDuration: Duration(c.ParentShutdownDuration), ProxyPath: c.ProxyPath,
		DataPlane: c.DataPlane, BootstrapOverride: c.BootstrapOverride,
	}
}

// ProxySettings returns the proxy settings in c, as PUT /proxy-config takes them: the
// lab sends them when a Workload's sidecar settings change.
func (c Config) ProxySettings() ProxySettings { return c.settings() }

// withSettings returns c with the proxy settings s (defaults applied).
func (c Config) withSettings(s ProxySettings) Config {
	s = s.withDefaults()
	c.LogLevel, c.Concurrency, c.ProxyPath = s.LogLevel, s.Concurrency, s.ProxyPath
	c.DataPlane, c.BootstrapOverride = s.DataPlane, s.BootstrapOverride
	c.DrainDuration, c.ParentShutdownDuration = time.Duration(s.DrainDuration), time.Duration(s.ParentShutdownDuration)
	return c
}

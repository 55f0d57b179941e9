package agent

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// proxyLogLevels are Envoy's --log-level values.
var proxyLogLevels = []string{"trace", "debug", "info", "warning", "warn", "error", "critical", "off"}

// validate reports every impossible value in s. Zero values are valid: they mean the
// defaults.
func validateSettings(s agentapi.ProxySettings) error {
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
	if s.DataPlane != "" && s.DataPlane != agentapi.DataPlaneChoiceEnvoy && s.DataPlane != agentapi.DataPlaneChoiceMeshlab {
		errs = append(errs, fmt.Errorf("data plane %q is not %q or %q", s.DataPlane, agentapi.DataPlaneChoiceEnvoy, agentapi.DataPlaneChoiceMeshlab))
	}
	if s.DataPlane == agentapi.DataPlaneChoiceMeshlab && s.ProxyPath != "" {
		errs = append(errs, fmt.Errorf("proxy path %q needs data plane %q, not %q", s.ProxyPath, agentapi.DataPlaneChoiceEnvoy, s.DataPlane))
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
func settingsWithDefaults(s agentapi.ProxySettings) agentapi.ProxySettings {
	if s.LogLevel == "" {
		s.LogLevel = DefaultLogLevel
	}
	if s.Concurrency == 0 {
		s.Concurrency = DefaultConcurrency
	}
	if s.DrainDuration == 0 {
		s.DrainDuration = agentapi.Duration(DefaultDrainDuration)
	}
	if s.ParentShutdownDuration == 0 {
		s.ParentShutdownDuration = agentapi.Duration(DefaultParentShutdownDuration)
	}
	return s
}

// settings returns the proxy settings in c.
func (c Config) settings() agentapi.ProxySettings {
	return agentapi.ProxySettings{
		LogLevel: c.LogLevel, Concurrency: c.Concurrency, DrainDuration: agentapi.Duration(c.DrainDuration),
		ParentShutdownDuration: agentapi.Duration(c.ParentShutdownDuration), ProxyPath: c.ProxyPath,
		DataPlane: c.DataPlane, BootstrapOverride: c.BootstrapOverride,
	}
}

// ProxySettings returns the proxy settings in c, as PUT /proxy-config takes them: the
// lab sends them when a Workload's sidecar settings change.
func (c Config) ProxySettings() agentapi.ProxySettings { return c.settings() }

// withSettings returns c with the proxy settings s (defaults applied).
func (c Config) withSettings(s agentapi.ProxySettings) Config {
	s = settingsWithDefaults(s)
	c.LogLevel, c.Concurrency, c.ProxyPath = s.LogLevel, s.Concurrency, s.ProxyPath
	c.DataPlane, c.BootstrapOverride = s.DataPlane, s.BootstrapOverride
	c.DrainDuration, c.ParentShutdownDuration = time.Duration(s.DrainDuration), time.Duration(s.ParentShutdownDuration)
	return c
}

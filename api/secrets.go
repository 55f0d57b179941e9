package api

import (
	"time"
)

// ProxySecret is one secret a proxy holds, as its admin /config_dump lists it under
// dynamic_active_secrets (the secrets its agent served it over SDS).
type ProxySecret struct {
	Name        string    `json:"name"`        // "default" (the workload certificate) or "ROOTCA"
	Kind        string    `json:"kind"`        // "certificate" (tls_certificate) or "validation" (validation_context)
	Version     string    `json:"version"`     // version_info: the agent sends the certificate's serial
	LastUpdated time.Time `json:"lastUpdated"` // when the proxy took it
}

// PodSecrets is the SDS state of one pod's proxy: the secrets it holds, or why they could
// not be read.
type PodSecrets struct {
	Pod     string        `json:"pod"`
	Secrets []ProxySecret `json:"secrets"`
	Error   string        `json:"error,omitempty"`
}

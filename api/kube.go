package api

import (
	"encoding/json"
)

// KubeObject is one object as kubectl would read it from an API server (with the status
// its controller writes), as GET /v1/kube lists it.
type KubeObject struct {
	Kind      string          `json:"kind"`
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Object    json.RawMessage `json:"object"`
}

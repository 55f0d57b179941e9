package api

import (
	"context"
	"encoding/json"
	"net/url"
)

// KubeObject is one object as kubectl would read it from an API server (with the status
// its controller writes), as GET /v1/kube lists it.
type KubeObject struct {
	Kind      string          `json:"kind"`
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Object    json.RawMessage `json:"object"`
}

// KubeObjects lists the lab's objects as kubectl reads them: kind (any spelling kubectl
// takes), namespace and name ("" for any) and a label selector (kubectl's -l, "" for
// all).
func (c *Client) KubeObjects(ctx context.Context, kind, namespace, name, selector string) ([]KubeObject, error) {
	q := url.Values{"kind": {kind}, "namespace": {namespace}, "name": {name}, "labelSelector": {selector}}
	var out []KubeObject
	return out, c.get(ctx, "/v1/kube?"+q.Encode(), &out)
}

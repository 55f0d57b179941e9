package lab

import (
	"encoding/json"
	"sync"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/meshlab/meshlab/controlplane/config"
)

// decodedWorkloads keeps the written Deployments decoded, one decode per stored object:
// the store replaces an object on each write (config.Scenario.Apply makes a new
// *config.Object), so an object's pointer names one revision of it, and `get
// deployments` renders each from a copy of its decode rather than decoding its JSON
// (its kubectl apply record too) at every read. Safe for concurrent use.
type decodedWorkloads struct {
	mu sync.Mutex
	m  map[*config.Object]*appsv1.Deployment // nil: the object did not decode
}

// deployments returns the decoded Deployment of each written Deployment of objects, a
// copy of its own (the caller may change it), and forgets the objects the store no
// longer holds. An object that does not decode is left out (it loaded strictly once:
// a copy that no longer reads shows no spec).
func (c *decodedWorkloads) deployments(objects []*config.Object) map[*config.Object]*appsv1.Deployment {
	out := map[*config.Object]*appsv1.Deployment{}
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := make(map[*config.Object]*appsv1.Deployment, len(c.m))
	for _, o := range objects {
		if o.Origin.Kind != "Deployment" {
			continue
		}
		d, ok := c.m[o]
		if !ok {
			d = &appsv1.Deployment{}
			if json.Unmarshal(o.JSON, d) != nil {
				d = nil
			}
		}
		kept[o] = d
		if d != nil {
			out[o] = d.DeepCopy()
		}
	}
	c.m = kept
	return out
}

package proxy

import (
	"fmt"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
)

// applyWorkloads replaces the metadata discovery index with the workloads of a WDS
// response (all of them: the subscription is a wildcard), as istio-proxy's
// metadata_discovery extension does; a response that does not decode is refused whole.
func applyWorkloads(resources []*anypb.Any) error {
	ws := make([]*workload.Workload, 0, len(resources))
	for i, a := range resources {
		w := &workload.Workload{}
		if err := a.UnmarshalTo(w); err != nil {
			return fmt.Errorf("resources[%d]: %w", i, err)
		}
		ws = append(ws, w)
	}
	peer.SetWorkloads(peer.NewWorkloads(ws))
	return nil
}

package discovery

import (
	"context"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/meshlab/meshlab/internal/testutil"
)

// A node that leaves the mesh while its proxy is still connected (a removed pod's proxy
// draining) stays in the status until its stream closes, then goes; a node that leaves
// disconnected goes at once.
func TestTrackerForgetsDrainingNodeOnClose(t *testing.T) {
	tr := newTracker(testutil.Logger(t), time.Now)
	open := func(stream int64, node string) {
		if err := tr.onOpen(context.Background(), stream, ""); err != nil {
			t.Fatal(err)
		}
		if err := tr.onRequest(stream, &discoverypb.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster"}); err != nil {
			t.Fatal(err)
		}
	}
	listed := func(node string) bool {
		for _, ps := range tr.status(nil) {
			if ps.NodeID == node {
				return true
			}
		}
		return false
	}
	open(1, "draining")
	open(2, "stays")
	tr.forget([]string{"draining"})
	if !listed("draining") {
		t.Fatal("a connected node left the status when it left the mesh; it should stay until it disconnects")
	}
	tr.onClosed(1, nil)
	if listed("draining") {
		t.Error("a node that left the mesh is still listed after its stream closed")
	}
	tr.onClosed(2, nil)
	if !listed("stays") {
		t.Error("a node still in the mesh left the status when it disconnected")
	}
	tr.forget([]string{"stays"})
	if listed("stays") {
		t.Error("a disconnected node is still listed after it left the mesh")
	}
}

package discovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// TestUpdateRefusesPushAboveLimit: a model whose routes would not fit in one xDS message
// is refused for each proxy it would reach, before the proxy gets it, naming the proxy,
// the type and the largest resource; every proxy keeps its version, and its status
// says why.
func TestUpdateRefusesPushAboveLimit(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	m := helloModel()
	if err := s.Update(context.Background(), m); err != nil {
		t.Fatalf("Update: %v", err)
	}
	before := s.Status()

	big := helloModel()
	// One VirtualService of many routes with long paths: the RDS of port 8080 weighs
	// more than MaxPushBytes.
	spec := &networking.VirtualService{Hosts: []string{"backend.default.svc.cluster.local"}}
	pad := strings.Repeat("x", 1000)
	for i := range MaxPushBytes / 1000 {
		spec.Http = append(spec.Http, &networking.HTTPRoute{
			Match: []*networking.HTTPMatchRequest{{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: fmt.Sprintf("/%d/%s", i, pad)}}}},
			Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "backend.default.svc.cluster.local"}}},
		})
	}
	big.Istio.VirtualServices = append(big.Istio.VirtualServices, &model.IstioConfig[*networking.VirtualService]{Name: "big", Namespace: "default", Spec: spec})
	err := s.Update(context.Background(), big)
	var tooLarge *PushTooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("Update of %d routes: %v, want a PushTooLargeError", len(spec.Http), err)
	}
	if tooLarge.TypeURL != resource.RouteType || tooLarge.Bytes <= MaxPushBytes || len(tooLarge.Largest) == 0 || !strings.HasPrefix(tooLarge.Largest[0], "8080 ") ||
		tooLarge.Origin != "/apis/networking.istio.io/v1/namespaces/default/virtual-service/big" {
		t.Errorf("refusal %+v: want RouteConfiguration 8080 named as the largest, from VirtualService default/big", tooLarge)
	}
	t.Log(err)
	after := s.Status()
	for i, ps := range after {
		if !strings.Contains(ps.PushError, "above the") {
			t.Errorf("%s: push error %q, want the refusal", ps.NodeID, ps.PushError)
		}
		after[i].PushError = ""
	}
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("status changed by a refused update:\nbefore %v\nafter  %v", before, after)
	}
}

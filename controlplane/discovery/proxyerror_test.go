package discovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// TestUpdateOneProxyErrorPushesTheOthers: a model whose config cannot be generated for
// one proxy (its routes, matched by its source labels, would not fit in one push) gives
// that proxy the error, logged, as an EventPushError and in its status, while it keeps
// its previous config, and every other proxy its new config, as istiod fails the push
// of one proxy only. A later model that can be generated clears the error.
func TestUpdateOneProxyErrorPushesTheOthers(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var failures []Event
	s := startServer(t, Options{SocketGID: -1, OnEvent: func(e Event) {
		if e.Kind == EventPushError {
			mu.Lock()
			failures = append(failures, e)
			mu.Unlock()
		}
	}})
	ctx := context.Background()
	if err := s.Update(ctx, helloModel()); err != nil {
		t.Fatalf("Update: %v", err)
	}
	before := wantsByNode(s)

	m := helloModel()
	var frontend string
	for _, p := range m.Pods {
		if p.Name == "frontend-v1" {
			frontend = p.NodeID()
		}
	}
	backend := "backend.default.svc.cluster.local"
	spec := &networking.VirtualService{Hosts: []string{backend}}
	pad := strings.Repeat("x", 1000)
	for i := range MaxPushBytes / 2000 { // about 40 MB of routes: above the limit
		spec.Http = append(spec.Http, &networking.HTTPRoute{
			Match: []*networking.HTTPMatchRequest{{
				SourceLabels: map[string]string{"app": "frontend"},
				Uri:          &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: fmt.Sprintf("/%d/%s", i, pad)}},
			}},
			Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: backend}}},
		})
	}
	// A route every proxy has: each one's routes change.
	spec.Http = append(spec.Http, &networking.HTTPRoute{Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: backend}}}})
	m.Istio.VirtualServices = append(m.Istio.VirtualServices, &model.IstioConfig[*networking.VirtualService]{Name: "big", Namespace: "default", Spec: spec})

	err := s.Update(ctx, m)
	var perProxy *ProxyErrors
	if !errors.As(err, &perProxy) {
		t.Fatalf("Update: %v, want a *ProxyErrors", err)
	}
	var tooLarge *PushTooLargeError
	if len(perProxy.Errs) != 1 || !errors.As(perProxy.Errs[frontend], &tooLarge) || !errors.As(err, &tooLarge) {
		t.Fatalf("Update's errors %v: want frontend's PushTooLargeError alone", perProxy.Errs)
	}
	t.Log(err)
	after := wantsByNode(s)
	for _, ps := range s.Status() {
		switch {
		case ps.NodeID == frontend:
			if after[ps.NodeID] != before[ps.NodeID] || !strings.Contains(ps.PushError, "above the") {
				t.Errorf("frontend: want %s (was %s), push error %q: want its previous config and the size error", after[ps.NodeID], before[ps.NodeID], ps.PushError)
			}
		case after[ps.NodeID] == before[ps.NodeID] || ps.PushError != "":
			t.Errorf("%s: want %s (was %s), push error %q: want the new config and no error", ps.NodeID, after[ps.NodeID], before[ps.NodeID], ps.PushError)
		}
	}
	mu.Lock()
	got := fmt.Sprint(failures)
	if len(failures) != 1 || failures[0].NodeID != frontend || failures[0].Version != perProxy.Version || !strings.Contains(failures[0].Error, "above the") {
		t.Errorf("push error events %s: want one for %s of %s", got, frontend, perProxy.Version)
	}
	mu.Unlock()

	if err := s.Update(ctx, helloModel()); err != nil {
		t.Fatalf("Update without the large VirtualService: %v", err)
	}
	final := wantsByNode(s)
	for _, ps := range s.Status() {
		if ps.PushError != "" || final[ps.NodeID] == after[ps.NodeID] && ps.NodeID != frontend {
			t.Errorf("%s: want %s, push error %q after a model that generates", ps.NodeID, final[ps.NodeID], ps.PushError)
		}
	}
}

// wantsByNode is the RDS version each proxy's snapshot holds (Status' Want).
func wantsByNode(s *Server) map[string]string {
	out := map[string]string{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, st := range s.proxies {
		out[id] = st.types[resource.RouteType].since
	}
	return out
}

package xds

import (
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/controlplane/model"
)

func byName(rs []types.Resource, name string) types.Resource {
	for _, r := range rs {
		if cache.GetResourceName(r) == name {
			return r
		}
	}
	return nil
}

// TestSidecarSendsHBONEToAmbientPod: once backend-v2 has no sidecar and carries the
// redirection annotation, frontend's sidecar reaches it through connect_originate (the
// tunnel metadata on its endpoint, "hbone" first in the cluster's matches, the internal
// listener and its cluster), keeps Istio mTLS to backend-v1, and a model without an
// ambient pod keeps none of it.
func TestSidecarSendsHBONEToAmbientPod(t *testing.T) {
	t.Parallel()
	const backend = "outbound|8080||backend.default.svc.cluster.local"
	plain := generate(t, helloModel(), "frontend-v1")
	if byName(plain[resource.ListenerType], ConnectOriginateListener) != nil || byName(plain[resource.ClusterType], ConnectOriginateListener) != nil {
		t.Error("a lab without an ambient pod has connect_originate")
	}
	if ms := byName(plain[resource.ClusterType], backend).(*cluster.Cluster).GetTransportSocketMatches(); len(ms) != 2 || ms[0].GetName() != TLSModeIstioMatch {
		t.Errorf("without ambient, the matches are %v, want tlsMode-istio and tlsMode-disabled", ms)
	}

	m := helloModel()
	v2 := m.Pod("backend-v2")
	v2.Sidecar.Inject = false
	v2.Annotations = map[string]string{model.AnnotationAmbientRedirection: model.AmbientRedirectionEnabled}
	res := generate(t, m, "frontend-v1")
	if l, ok := byName(res[resource.ListenerType], ConnectOriginateListener).(*listener.Listener); !ok || l.GetInternalListener() == nil {
		t.Errorf("no internal listener %s", ConnectOriginateListener)
	}
	if c, ok := byName(res[resource.ClusterType], ConnectOriginateListener).(*cluster.Cluster); !ok || c.GetOriginalDstLbConfig().GetUpstreamPortOverride().GetValue() != HBONEPort {
		t.Errorf("no cluster %s to port %d", ConnectOriginateListener, HBONEPort)
	}
	c := byName(res[resource.ClusterType], backend).(*cluster.Cluster)
	if ms := c.GetTransportSocketMatches(); len(ms) != 3 || ms[0].GetName() != HBONEMatch || ms[0].GetMatch().GetFields()[TunnelMatchKey].GetStringValue() != TunnelHTTP {
		t.Errorf("matches %v, want hbone {tunnel: http} first", ms)
	}
	if c.GetMetadata().GetFilterMetadata()["istio"].GetFields()["disable_mx"] != nil {
		t.Error("disable_mx on a cluster with a sidecar endpoint")
	}
	cla := byName(res[resource.EndpointType], backend).(*endpoint.ClusterLoadAssignment)
	for _, lb := range cla.GetEndpoints()[0].GetLbEndpoints() {
		md := lb.GetMetadata().GetFilterMetadata()
		internal := lb.GetEndpoint().GetAddress().GetEnvoyInternalAddress()
		switch {
		case internal != nil:
			if internal.GetServerListenerName() != ConnectOriginateListener || internal.GetEndpointId() != "10.244.0.4:8080" ||
				md[originalDstMetadata].GetFields()["local"].GetStringValue() != "10.244.0.4:8080" ||
				md[TransportSocketMatchKey].GetFields()[TunnelMatchKey].GetStringValue() != TunnelHTTP {
				t.Errorf("backend-v2's endpoint: %v", lb)
			}
		case lb.GetEndpoint().GetAddress().GetSocketAddress().GetAddress() == "10.244.0.3":
			if md[TransportSocketMatchKey].GetFields()[TLSModeKey].GetStringValue() != TLSModeIstio {
				t.Errorf("backend-v1 (sidecar) lost its tlsMode: %v", lb)
			}
		default:
			t.Errorf("unexpected endpoint %v", lb)
		}
	}
	if got := len(cla.GetEndpoints()[0].GetLbEndpoints()); got != 2 {
		t.Errorf("%d endpoints, want 2", got)
	}

	// Every endpoint tunnelling: metadata exchange is off for the cluster (disable_mx).
	m.Pod("backend-v1").Sidecar.Inject = false
	m.Pod("backend-v1").Annotations = v2.Annotations
	c = byName(generate(t, m, "frontend-v1")[resource.ClusterType], backend).(*cluster.Cluster)
	if !c.GetMetadata().GetFilterMetadata()["istio"].GetFields()["disable_mx"].GetBoolValue() {
		t.Error("no disable_mx on a cluster whose endpoints all speak HBONE")
	}
}

// TestChangeScopeFullWhenHBONEStarts: the first ambient pod gives every proxy
// connect_originate, so the change is generated whole.
func TestChangeScopeFullWhenHBONEStarts(t *testing.T) {
	t.Parallel()
	old := helloModel()
	cur := helloModel()
	cur.Pod("backend-v2").Labels[model.LabelDataplaneMode] = model.DataplaneModeAmbient
	if sc := ChangeScope(old, cur); !sc.Full() {
		t.Errorf("scope %+v, want every type", sc)
	}
}

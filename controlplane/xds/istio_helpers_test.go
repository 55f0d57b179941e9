package xds

import (
	"net/netip"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// istioModel is a small bookinfo: productpage calls reviews (two versions, HTTP 9080)
// and db (two versions, TCP 5432), all in namespace default, plus a tester pod in
// namespace qa. It has no Istio objects; cases add them.
func istioModel() *model.Model {
	svc := func(name, vip string, p model.ServicePort) *model.Service {
		return &model.Service{
			Name: name, Namespace: "default", VIP: netip.MustParseAddr(vip), Ports: []model.ServicePort{p},
			Selector: map[string]string{"app": name},
			Origin:   model.Origin{File: "bookinfo.yaml", Kind: "Service", Namespace: "default", Name: name},
		}
	}
	pod := func(ns, name, app, version, ip string, port uint16) *model.Pod {
		return &model.Pod{
			Name: name, Namespace: ns, Workload: name,
			Labels:         map[string]string{"app": app, "version": version},
			ServiceAccount: app, IP: netip.MustParseAddr(ip), Ports: []uint16{port},
			Sidecar: model.SidecarSpec{Inject: true},
		}
	}
	httpPort := model.ServicePort{Name: "http", Port: 9080, TargetPort: 9080, Protocol: model.ProtocolHTTP}
	tcpPort := model.ServicePort{Name: "tcp-db", Port: 5432, TargetPort: 5432, Protocol: model.ProtocolTCP}
	return model.New(
		[]*model.Service{
			svc("productpage", "10.96.0.20", httpPort),
			svc("reviews", "10.96.0.21", httpPort),
			svc("db", "10.96.0.22", tcpPort),
		},
		[]*model.Pod{
			pod("default", "productpage-v1", "productpage", "v1", "10.244.0.10", 9080),
			pod("default", "reviews-v1", "reviews", "v1", "10.244.0.11", 9080),
			pod("default", "reviews-v2", "reviews", "v2", "10.244.0.12", 9080),
			pod("default", "db-v1", "db", "v1", "10.244.0.13", 5432),
			pod("default", "db-v2", "db", "v2", "10.244.0.14", 5432),
			pod("qa", "tester", "tester", "v1", "10.244.0.15", 8080),
		},
	)
}

func vs(name string, spec *networking.VirtualService) *model.IstioConfig[*networking.VirtualService] {
	return &model.IstioConfig[*networking.VirtualService]{
		Name: name, Namespace: "default", Spec: spec,
		Origin: model.Origin{File: "istio.yaml", Kind: "VirtualService", Namespace: "default", Name: name},
	}
}

func dr(name string, spec *networking.DestinationRule) *model.IstioConfig[*networking.DestinationRule] {
	return &model.IstioConfig[*networking.DestinationRule]{
		Name: name, Namespace: "default", Spec: spec,
		Origin: model.Origin{File: "istio.yaml", Kind: "DestinationRule", Namespace: "default", Name: name},
	}
}

func se(name string, spec *networking.ServiceEntry) *model.IstioConfig[*networking.ServiceEntry] {
	return &model.IstioConfig[*networking.ServiceEntry]{
		Name: name, Namespace: "default", Spec: spec,
		Origin: model.Origin{File: "istio.yaml", Kind: "ServiceEntry", Namespace: "default", Name: name},
	}
}

// reviewsSubsets is the usual DestinationRule of reviews: subsets v1 and v2 by label.
func reviewsSubsets() *model.IstioConfig[*networking.DestinationRule] {
	return dr("reviews", &networking.DestinationRule{
		Host: "reviews",
		Subsets: []*networking.Subset{
			{Name: "v1", Labels: map[string]string{"version": "v1"}},
			{Name: "v2", Labels: map[string]string{"version": "v2"}},
		},
	})
}

func dest(host, subset string, weight int32) *networking.HTTPRouteDestination {
	return &networking.HTTPRouteDestination{Destination: &networking.Destination{Host: host, Subset: subset}, Weight: weight}
}

func exact(s string) *networking.StringMatch {
	return &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: s}}
}

func prefix(s string) *networking.StringMatch {
	return &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: s}}
}

func regex(s string) *networking.StringMatch {
	return &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: s}}
}

func ms(n int64) *durationpb.Duration { return durationpb.New(timeMS(n)) }

func u32(v uint32) *wrapperspb.UInt32Value { return wrapperspb.UInt32(v) }

func timeMS(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

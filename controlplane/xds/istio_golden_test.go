package xds

import (
	"testing"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// istioCases are the traffic-management features, one golden file each
// (testdata/istio-<name>.golden, the config of productpage-v1's proxy): the base
// istioModel plus what mutate adds.
var istioCases = []struct {
	name   string
	mutate func(*model.Model)
}{
	{
		name: "dr-subsets",
		mutate: func(m *model.Model) {
			m.Istio.DestinationRules = append(m.Istio.DestinationRules, reviewsSubsets())
		},
	},
	{
		name: "dr-traffic-policy",
		mutate: func(m *model.Model) {
			m.Istio.DestinationRules = append(m.Istio.DestinationRules, dr("reviews", &networking.DestinationRule{
				Host: "reviews.default.svc.cluster.local",
				TrafficPolicy: &networking.TrafficPolicy{
					LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: networking.LoadBalancerSettings_LEAST_REQUEST}},
					ConnectionPool: &networking.ConnectionPoolSettings{
						Tcp: &networking.ConnectionPoolSettings_TCPSettings{MaxConnections: 1},
						Http: &networking.ConnectionPoolSettings_HTTPSettings{
							Http1MaxPendingRequests: 2, Http2MaxRequests: 3, MaxRequestsPerConnection: 4,
						},
					},
					OutlierDetection: &networking.OutlierDetection{
						Consecutive_5XxErrors: u32(3), Interval: ms(1000), BaseEjectionTime: ms(30000), MaxEjectionPercent: 100,
					},
				},
				Subsets: []*networking.Subset{
					{Name: "v1", Labels: map[string]string{"version": "v1"}},
					{
						Name: "v2", Labels: map[string]string{"version": "v2"},
						TrafficPolicy: &networking.TrafficPolicy{
							LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: networking.LoadBalancerSettings_RANDOM}},
						},
					},
				},
			}))
		},
	},
	{
		name: "dr-port-level",
		mutate: func(m *model.Model) {
			m.Istio.DestinationRules = append(m.Istio.DestinationRules, dr("reviews", &networking.DestinationRule{
				Host: "reviews",
				TrafficPolicy: &networking.TrafficPolicy{
					LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: networking.LoadBalancerSettings_RANDOM}},
					PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{
						Port: &networking.PortSelector{Number: 9080},
						ConnectionPool: &networking.ConnectionPoolSettings{
							Http: &networking.ConnectionPoolSettings_HTTPSettings{Http1MaxPendingRequests: 7},
						},
					}},
				},
				Subsets: []*networking.Subset{{Name: "v1", Labels: map[string]string{"version": "v1"}}},
			}))
		},
	},
	{
		name: "vs-weighted",
		mutate: func(m *model.Model) {
			m.Istio.DestinationRules = append(m.Istio.DestinationRules, reviewsSubsets())
			m.Istio.VirtualServices = append(m.Istio.VirtualServices, vs("reviews", &networking.VirtualService{
				Hosts: []string{"reviews"},
				Http: []*networking.HTTPRoute{{
					Name:  "split",
					Route: []*networking.HTTPRouteDestination{dest("reviews", "v1", 90), dest("reviews", "v2", 10)},
				}},
			}))
		},
	},
	{
		name: "vs-match",
		mutate: func(m *model.Model) {
			m.Istio.DestinationRules = append(m.Istio.DestinationRules, reviewsSubsets())
			m.Istio.VirtualServices = append(m.Istio.VirtualServices, vs("reviews", &networking.VirtualService{
				Hosts: []string{"reviews.default.svc.cluster.local"},
				Http: []*networking.HTTPRoute{
					{
						Name: "jason",
						Match: []*networking.HTTPMatchRequest{
							{Name: "header", Headers: map[string]*networking.StringMatch{"end-user": exact("jason"), "x-canary": regex("*")}},
							{Name: "query", Uri: prefix("/api"), QueryParams: map[string]*networking.StringMatch{"v": exact("2")}, Method: exact("GET")},
							{Name: "regex", Uri: regex("/reviews/[0-9]+")},
							{Name: "qa-only", Uri: exact("/qa"), SourceLabels: map[string]string{"app": "tester"}},
						},
						Route: []*networking.HTTPRouteDestination{dest("reviews", "v2", 0)},
					},
					{Name: "rest", Route: []*networking.HTTPRouteDestination{dest("reviews", "v1", 0)}},
					{Name: "never", Route: []*networking.HTTPRouteDestination{dest("reviews", "v2", 0)}},
				},
			}))
		},
	},
	{
		name: "vs-retries-timeout",
		mutate: func(m *model.Model) {
			m.Istio.VirtualServices = append(m.Istio.VirtualServices, vs("reviews", &networking.VirtualService{
				Hosts: []string{"reviews"},
				Http: []*networking.HTTPRoute{
					{
						Match:   []*networking.HTTPMatchRequest{{Uri: prefix("/slow")}},
						Timeout: ms(2500),
						Retries: &networking.HTTPRetry{Attempts: 3, PerTryTimeout: ms(500), RetryOn: "5xx,reset,503"},
						Route:   []*networking.HTTPRouteDestination{dest("reviews", "", 0)},
					},
					{
						Retries: &networking.HTTPRetry{Attempts: 2},
						Route:   []*networking.HTTPRouteDestination{dest("reviews", "", 0)},
					},
				},
			}))
		},
	},
	{
		name: "vs-fault",
		mutate: func(m *model.Model) {
			m.Istio.VirtualServices = append(m.Istio.VirtualServices, vs("reviews", &networking.VirtualService{
				Hosts: []string{"reviews"},
				Http: []*networking.HTTPRoute{{
					Fault: &networking.HTTPFaultInjection{
						Delay: &networking.HTTPFaultInjection_Delay{
							HttpDelayType: &networking.HTTPFaultInjection_Delay_FixedDelay{FixedDelay: ms(2000)},
							Percentage:    &networking.Percent{Value: 100},
						},
						Abort: &networking.HTTPFaultInjection_Abort{
							ErrorType:  &networking.HTTPFaultInjection_Abort_HttpStatus{HttpStatus: 503},
							Percentage: &networking.Percent{Value: 12.5},
						},
					},
					Route: []*networking.HTTPRouteDestination{dest("reviews", "", 0)},
				}},
			}))
		},
	},
	{
		name: "vs-rewrite-redirect-mirror-headers",
		mutate: func(m *model.Model) {
			m.Istio.DestinationRules = append(m.Istio.DestinationRules, reviewsSubsets())
			m.Istio.VirtualServices = append(m.Istio.VirtualServices, vs("reviews", &networking.VirtualService{
				Hosts: []string{"reviews"},
				Http: []*networking.HTTPRoute{
					{
						Name:     "old",
						Match:    []*networking.HTTPMatchRequest{{Uri: prefix("/old")}},
						Redirect: &networking.HTTPRedirect{Uri: "/new", Authority: "productpage", RedirectCode: 302},
					},
					{
						Name:    "v1api",
						Match:   []*networking.HTTPMatchRequest{{Uri: prefix("/v1/")}},
						Rewrite: &networking.HTTPRewrite{Uri: "/", Authority: "reviews.internal"},
						Route:   []*networking.HTTPRouteDestination{dest("reviews", "v1", 0)},
					},
					{
						Name:             "mirrored",
						Mirror:           &networking.Destination{Host: "reviews", Subset: "v2"},
						MirrorPercentage: &networking.Percent{Value: 25},
						Headers: &networking.Headers{
							Request: &networking.Headers_HeaderOperations{
								Set: map[string]string{"x-b": "set", "x-a": "set"}, Add: map[string]string{"x-c": "add"}, Remove: []string{"x-secret", ":path"},
							},
							Response: &networking.Headers_HeaderOperations{Set: map[string]string{"x-served-by": "meshlab"}, Remove: []string{"server"}},
						},
						Route: []*networking.HTTPRouteDestination{
							{
								Destination: &networking.Destination{Host: "reviews", Subset: "v1"}, Weight: 50,
								Headers: &networking.Headers{Response: &networking.Headers_HeaderOperations{Add: map[string]string{"x-version": "v1"}}},
							},
							dest("reviews", "v2", 50),
						},
					},
				},
			}))
		},
	},
	{
		name: "vs-tcp-weighted",
		mutate: func(m *model.Model) {
			m.Istio.DestinationRules = append(m.Istio.DestinationRules, dr("db", &networking.DestinationRule{
				Host: "db",
				Subsets: []*networking.Subset{
					{Name: "v1", Labels: map[string]string{"version": "v1"}},
					{Name: "v2", Labels: map[string]string{"version": "v2"}},
				},
			}))
			m.Istio.VirtualServices = append(m.Istio.VirtualServices, vs("db", &networking.VirtualService{
				Hosts: []string{"db"},
				Tcp: []*networking.TCPRoute{{Route: []*networking.RouteDestination{
					{Destination: &networking.Destination{Host: "db", Subset: "v1"}, Weight: 80},
					{Destination: &networking.Destination{Host: "db", Subset: "v2"}, Weight: 20},
				}}},
			}))
		},
	},
	{
		name: "se-static",
		mutate: func(m *model.Model) {
			m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, se("payments", &networking.ServiceEntry{
				Hosts:      []string{"payments.internal"},
				Addresses:  []string{"10.96.1.1"},
				Location:   networking.ServiceEntry_MESH_INTERNAL,
				Resolution: networking.ServiceEntry_STATIC,
				Ports: []*networking.ServicePort{
					{Number: 80, Name: "http", Protocol: "HTTP", TargetPort: 9080},
					{Number: 6379, Name: "tcp-cache", Protocol: "TCP"},
				},
				Endpoints: []*networking.WorkloadEntry{
					{Address: "10.244.0.11", Labels: map[string]string{"version": "v1"}},
					{Address: "reviews-v2", Ports: map[string]uint32{"http": 9081}},
				},
			}))
			m.Istio.DestinationRules = append(m.Istio.DestinationRules, dr("payments", &networking.DestinationRule{
				Host:    "payments.internal",
				Subsets: []*networking.Subset{{Name: "v2", Labels: map[string]string{"version": "v2"}}},
			}))
		},
	},
	{
		name: "se-dns",
		mutate: func(m *model.Model) {
			m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, se("legacy", &networking.ServiceEntry{
				Hosts:      []string{"legacy.lab"},
				Location:   networking.ServiceEntry_MESH_INTERNAL,
				Resolution: networking.ServiceEntry_DNS,
				Ports:      []*networking.ServicePort{{Number: 9080, Name: "http", Protocol: "HTTP"}},
				Endpoints:  []*networking.WorkloadEntry{{Address: "reviews.default.svc.cluster.local"}},
			}))
		},
	},
	{
		// Istio's upstream HTTP/2 for ports named (or with appProtocol) grpc and http2,
		// on the outbound and the inbound clusters.
		name: "http2",
		mutate: func(m *model.Model) {
			for _, s := range m.Services {
				switch s.Name {
				case "productpage":
					s.Ports[0].Name, s.Ports[0].Protocol = "grpc", model.ProtocolGRPC
				case "reviews":
					s.Ports[0].Name, s.Ports[0].Protocol = "http2", model.ProtocolHTTP2
				}
			}
		},
	},
	{
		name: "registry-only",
		mutate: func(m *model.Model) {
			m.Mesh.OutboundTrafficPolicy = model.RegistryOnly
		},
	},
	{
		// Unnamed ports (istiod's protocol sniffing): reviews' port has no protocol, so
		// productpage's proxy gets a sniffing listener on reviews' VIP (HTTP by route
		// "reviews.default.svc.cluster.local:9080" with the VirtualService's split,
		// anything else by tcp_proxy), and productpage's own port, unnamed too, the
		// inbound chains of a port of unknown protocol.
		name: "sniffed-port",
		mutate: func(m *model.Model) {
			for _, s := range m.Services {
				if s.Name == "reviews" || s.Name == "productpage" {
					s.Ports[0].Name, s.Ports[0].Protocol = "", model.ProtocolAuto
				}
			}
			m.Istio.DestinationRules = append(m.Istio.DestinationRules, reviewsSubsets())
			m.Istio.VirtualServices = append(m.Istio.VirtualServices, vs("reviews", &networking.VirtualService{
				Hosts: []string{"reviews"},
				Http: []*networking.HTTPRoute{{
					Name:  "split",
					Route: []*networking.HTTPRouteDestination{dest("reviews", "v1", 80), dest("reviews", "v2", 20)},
				}},
			}))
		},
	},
}

// istioCaseModel returns the base model with the named case applied.
func istioCaseModel(t *testing.T, name string) *model.Model {
	t.Helper()
	for _, c := range istioCases {
		if c.name == name {
			m := istioModel()
			c.mutate(m)
			return m
		}
	}
	t.Fatalf("no case %q", name)
	return nil
}

func TestGenerateIstioGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range istioCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := istioModel()
			tc.mutate(m)
			for _, pod := range m.Pods {
				res, err := Generate(m, pod)
				if err != nil {
					t.Fatalf("Generate(%s): %v", pod.Name, err)
				}
				for typ, rs := range res {
					for _, r := range rs {
						validateDeep(t, pod.Name+":"+typ+"/"+cachev3.GetResourceName(r), r)
					}
				}
				snap, err := cachev3.NewSnapshot("v1", res)
				if err != nil {
					t.Fatalf("NewSnapshot(%s): %v", pod.Name, err)
				}
				if err := snap.Consistent(); err != nil {
					t.Errorf("snapshot of %s inconsistent: %v", pod.Name, err)
				}
			}
			testutil.Golden(t, "istio-"+tc.name, dumpJSON(t, generate(t, m, "productpage-v1")))
		})
	}
}

// BenchmarkGenerateIstio measures one proxy's generation with every traffic feature of
// the golden cases at once (go test -bench GenerateIstio ./controlplane/xds/).
func BenchmarkGenerateIstio(b *testing.B) {
	m := istioModel()
	for _, c := range istioCases {
		if c.name != "dr-subsets" && c.name != "vs-weighted" && c.name != "vs-rewrite-redirect-mirror-headers" && c.name != "dr-traffic-policy" {
			c.mutate(m)
		}
	}
	pod := m.Pod("productpage-v1")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Generate(m, pod); err != nil {
			b.Fatal(err)
		}
	}
}

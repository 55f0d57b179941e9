package xds

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
)

func TestNames(t *testing.T) {
	t.Parallel()
	svc := &model.Service{Name: "reviews", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.20")}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{name: "outbound subset", got: OutboundClusterName(9080, "v1", "reviews.default.svc.cluster.local"), want: "outbound|9080|v1|reviews.default.svc.cluster.local"},
		{name: "outbound no subset", got: OutboundClusterName(9080, "", "reviews.default.svc.cluster.local"), want: "outbound|9080||reviews.default.svc.cluster.local"},
		{name: "inbound", got: InboundClusterName(8080), want: "inbound|8080||"},
		{name: "http listener", got: OutboundHTTPListenerName(9080), want: "0.0.0.0_9080"},
		{name: "tcp listener", got: OutboundTCPListenerName(netip.MustParseAddr("10.96.0.12"), 5432), want: "10.96.0.12_5432"},
		{name: "inbound chain", got: InboundChainName(8080), want: "0.0.0.0_8080"},
		{name: "route", got: RouteName(9080), want: "9080"},
		{name: "virtual host", got: VirtualHostName(svc, 9080), want: "reviews.default.svc.cluster.local:9080"},
		{name: "config path", got: ServiceConfigPath(svc), want: "/apis/v1/namespaces/default/services/reviews"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestDomains(t *testing.T) {
	t.Parallel()
	base := model.Service{Name: "reviews", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.20")}
	tests := []struct {
		name    string
		mutate  func(*model.Service)
		proxyNS string
		want    []string
	}{
		{
			name: "same namespace", proxyNS: "default",
			want: []string{"reviews.default.svc.cluster.local", "reviews.default.svc.cluster.local.", "reviews", "reviews.default.svc", "reviews.default", "10.96.0.20"},
		},
		{
			name: "other namespace has no bare name", proxyNS: "shop",
			want: []string{"reviews.default.svc.cluster.local", "reviews.default.svc.cluster.local.", "reviews.default", "reviews.default.svc", "10.96.0.20"},
		},
		{
			name: "no VIP", proxyNS: "default", mutate: func(s *model.Service) { s.VIP = netip.Addr{} },
			want: []string{"reviews.default.svc.cluster.local", "reviews.default.svc.cluster.local.", "reviews", "reviews.default.svc", "reviews.default"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc := base
			if tt.mutate != nil {
				tt.mutate(&svc)
			}
			if got := Domains(&svc, tt.proxyNS); !slices.Equal(got, tt.want) {
				t.Errorf("Domains = %q\nwant      %q", got, tt.want)
			}
		})
	}
}

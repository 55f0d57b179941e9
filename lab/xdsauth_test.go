package lab

import (
	"context"
	"net/netip"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshlab/meshlab/controlplane/ca"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/lab/caops"
)

func TestAuthorizeProxyOverTCP(t *testing.T) {
	pod := func(name, ip string, inject bool) *model.Pod {
		return &model.Pod{Name: name, Namespace: "default", ServiceAccount: name, IP: netip.MustParseAddr(ip), Sidecar: model.SidecarSpec{Inject: inject}}
	}
	m := model.New(nil, []*model.Pod{pod("frontend", "10.244.0.2", true), pod("backend", "10.244.0.3", true), pod("plain", "10.244.0.4", false)})
	labCA := caops.New(caops.Config{}, nil, nil)
	tokens := labCA.Tokens()
	issue := func(p *model.Pod) string {
		tok, err := tokens.Issue(ca.Caller{Pod: p.Name, Identity: ca.Identity{Namespace: p.Namespace, ServiceAccount: p.ServiceAccount}})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	frontendTok, backendTok, plainTok := issue(m.Pod("frontend")), issue(m.Pod("backend")), issue(m.Pod("plain"))
	ztTok, err := tokens.IssueZtunnel()
	if err != nil {
		t.Fatal(err)
	}
	const ztNode = "ztunnel~10.244.0.200~ztunnel-x.istio-system~istio-system.svc.cluster.local"
	l := &Lab{opts: Options{Name: "t"}, ca: labCA}
	authorize := l.proxyAuthorizer(newProxyNodes(m))
	bearer := func(tok string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+tok))
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		node string
		want codes.Code
	}{
		{name: "own token", ctx: bearer(backendTok), node: m.Pod("backend").NodeID(), want: codes.OK},
		{name: "no token", ctx: context.Background(), node: m.Pod("backend").NodeID(), want: codes.Unauthenticated},
		{name: "unknown token", ctx: bearer("x"), node: m.Pod("backend").NodeID(), want: codes.Unauthenticated},
		{name: "another pod's token", ctx: bearer(frontendTok), node: m.Pod("backend").NodeID(), want: codes.PermissionDenied},
		{name: "pod without a sidecar", ctx: bearer(plainTok), node: m.Pod("plain").NodeID(), want: codes.PermissionDenied},
		{name: "ztunnel's token as a ztunnel", ctx: bearer(ztTok), node: ztNode, want: codes.OK},
		{name: "a sidecar's token as a ztunnel", ctx: bearer(backendTok), node: ztNode, want: codes.PermissionDenied},
		{name: "no token as a ztunnel", ctx: context.Background(), node: ztNode, want: codes.PermissionDenied},
		{name: "ztunnel's token as a sidecar", ctx: bearer(ztTok), node: m.Pod("backend").NodeID(), want: codes.PermissionDenied},
		{name: "made-up node id", ctx: bearer(backendTok), node: "sidecar~10.244.0.3~backend.other~other.svc.cluster.local", want: codes.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := status.Code(authorize(tc.ctx, tc.node)); got != tc.want {
				t.Errorf("authorize = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseXDSListen(t *testing.T) {
	for in, ok := range map[string]bool{"127.0.0.1:15010": true, "[::1]:0": true, "0.0.0.0:15010": false, "10.0.0.1:15010": false, "localhost:15010": false, "127.0.0.1": false} {
		if _, err := ParseXDSListen(in); (err == nil) != ok {
			t.Errorf("ParseXDSListen(%q) = %v, want ok %v", in, err, ok)
		}
	}
}

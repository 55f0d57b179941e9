package ca

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	securitypb "istio.io/api/security/v1alpha1"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestServiceImpersonation asks for certificates as ztunnel does (its own token, the
// workload's identity in the request's ImpersonatedIdentity metadata) and checks that
// only ztunnel's identity may, as istiod's CA allows only its trusted node accounts.
func TestServiceImpersonation(t *testing.T) {
	t.Parallel()
	c := newCA(t, Options{})
	tokens := NewTokens()
	zt, err := tokens.IssueZtunnel()
	if err != nil {
		t.Fatal(err)
	}
	sidecar, err := tokens.Issue(Caller{Pod: "frontend-v1", Identity: Identity{Namespace: "default", ServiceAccount: "frontend"}})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	NewService(c, tokens, testutil.Logger(t)).Register(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := securitypb.NewIstioCertificateServiceClient(conn)
	call := func(tok, impersonate, san string) (*securitypb.IstioCertificateResponse, error) {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok), 5*time.Second)
		defer cancel()
		req := &securitypb.IstioCertificateRequest{Csr: string(csrFor(t, []string{san})), ValidityDuration: 60}
		if impersonate != "" {
			md, err := structpb.NewStruct(map[string]any{ImpersonatedIdentityKey: impersonate})
			if err != nil {
				t.Fatal(err)
			}
			req.Metadata = md
		}
		return client.CreateCertificate(ctx, req)
	}
	backendID := "spiffe://cluster.local/ns/default/sa/backend"
	resp, err := call(zt, backendID, backendID)
	if err != nil {
		t.Fatalf("ztunnel for backend: %v", err)
	}
	if leaf, _ := parseLeaf(t, resp.GetCertChain()); leaf.URIs[0].String() != backendID {
		t.Errorf("leaf %v, want %s", leaf.URIs, backendID)
	}
	ztID := ZtunnelIdentity.SPIFFEID(DefaultTrustDomain)
	if _, err := call(zt, "", ztID); err != nil {
		t.Errorf("ztunnel for itself: %v", err)
	}
	for _, tc := range []struct {
		name, tok, imp, san string
		want                codes.Code
	}{
		{"a sidecar may not impersonate", sidecar, backendID, backendID, codes.Unauthenticated},
		{"another trust domain", zt, "spiffe://example.org/ns/default/sa/backend", "spiffe://example.org/ns/default/sa/backend", codes.Unauthenticated},
		{"not a workload identity", zt, "spiffe://cluster.local/backend", "spiffe://cluster.local/backend", codes.Unauthenticated},
		{"CSR for another identity than impersonated", zt, backendID, "spiffe://cluster.local/ns/default/sa/frontend", codes.PermissionDenied},
		{"ztunnel's token for a workload without impersonating", zt, "", backendID, codes.PermissionDenied},
	} {
		if _, err := call(tc.tok, tc.imp, tc.san); status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
}

func TestParseSPIFFEID(t *testing.T) {
	t.Parallel()
	id, td, err := ParseSPIFFEID("spiffe://td.example/ns/a/sa/b")
	if err != nil || td != "td.example" || id != (Identity{Namespace: "a", ServiceAccount: "b"}) {
		t.Errorf("= %v %q %v", id, td, err)
	}
	for _, bad := range []string{"", "spiffe://td/ns/a/sa/", "spiffe://td/ns/a/sa/b/c", "http://td/ns/a/sa/b", "spiffe:///ns/a/sa/b", "spiffe://td/sa/a/ns/b"} {
		if _, _, err := ParseSPIFFEID(bad); err == nil {
			t.Errorf("ParseSPIFFEID(%q) accepted", bad)
		}
	}
}

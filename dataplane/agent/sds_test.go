package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshlab/meshlab/controlplane/ca"
	"github.com/meshlab/meshlab/internal/testutil"
)

// sdsFixture is a real CA served on a unix socket (as the lab serves it on xds.sock), a
// certManager using the agent's CA client with a token file, and the SDS server.
type sdsFixture struct {
	client secretservice.SecretDiscoveryServiceClient
	certs  *certManager
	ca     *ca.CA
	root   *ca.Root
}

func startSDS(t *testing.T, ttl time.Duration) *sdsFixture {
	t.Helper()
	dir := t.TempDir()
	root, err := ca.NewRoot(ca.DefaultTrustDomain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	authority, err := ca.New(ca.Options{Root: root, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	tokens := ca.NewTokens()
	tok, err := tokens.Issue(ca.Caller{Pod: "backend-v1", Identity: ca.Identity{Namespace: "default", ServiceAccount: "backend"}})
	if err != nil {
		t.Fatal(err)
	}
	tokenPath := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenPath, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	caSock := filepath.Join(dir, "xds.sock")
	caLn, err := net.Listen("unix", caSock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	ca.NewService(authority, tokens, testutil.Logger(t)).Register(g)
	go func() { _ = g.Serve(caLn) }()
	t.Cleanup(g.Stop)

	cac, err := newCAClient(caSock, tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cac.Close() })
	certs := newCertManager(cac, spiffeID("cluster.local", "default", "backend"), 0, testutil.Logger(t))
	sdsLn, err := listenSDS(SDSSocketPath(dir), os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = certs.Run(ctx); done <- struct{}{} }()
	go func() { _ = serveSDS(ctx, sdsLn, certs, "", "", testutil.Logger(t)); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })

	conn, err := grpc.NewClient("unix://"+SDSSocketPath(dir), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &sdsFixture{client: secretservice.NewSecretDiscoveryServiceClient(conn), certs: certs, ca: authority, root: root}
}

// recvSecrets reads one response and returns its secrets by name.
func recvSecrets(t *testing.T, s secretservice.SecretDiscoveryService_StreamSecretsClient) (*discoverypb.DiscoveryResponse, map[string]*tlsv3.Secret) {
	t.Helper()
	resp, err := s.Recv()
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	out := map[string]*tlsv3.Secret{}
	for _, a := range resp.GetResources() {
		var sec tlsv3.Secret
		if err := a.UnmarshalTo(&sec); err != nil {
			t.Fatal(err)
		}
		out[sec.GetName()] = &sec
	}
	return resp, out
}

// checkSecrets verifies that default is a key pair for the SPIFFE ID signed by ROOTCA,
// and returns the leaf.
func checkSecrets(t *testing.T, secs map[string]*tlsv3.Secret) *x509.Certificate {
	t.Helper()
	def, root := secs[SecretDefault].GetTlsCertificate(), secs[SecretRootCA].GetValidationContext()
	if def == nil || root == nil {
		t.Fatalf("secrets %v, want default (tls_certificate) and ROOTCA (validation_context)", secs)
	}
	pair, err := tls.X509KeyPair(def.GetCertificateChain().GetInlineBytes(), def.GetPrivateKey().GetInlineBytes())
	if err != nil {
		t.Fatalf("default is not a key pair: %v", err)
	}
	leaf := pair.Leaf
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://cluster.local/ns/default/sa/backend" {
		t.Fatalf("leaf SANs %v", leaf.URIs)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(root.GetTrustedCa().GetInlineBytes()) {
		t.Fatal("ROOTCA has no certificate")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("leaf does not verify against ROOTCA: %v", err)
	}
	return leaf
}

func TestSDSServesDefaultAndRootCA(t *testing.T) {
	t.Parallel()
	f := startSDS(t, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := f.client.StreamSecrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&discoverypb.DiscoveryRequest{TypeUrl: secretTypeURL, ResourceNames: []string{SecretDefault, SecretRootCA}}); err != nil {
		t.Fatal(err)
	}
	resp, secs := recvSecrets(t, stream)
	leaf := checkSecrets(t, secs)
	if resp.GetVersionInfo() != serial(leaf) {
		t.Errorf("version %q, want the serial %s", resp.GetVersionInfo(), serial(leaf))
	}
	st := f.certs.snapshot()
	if st.Serial != serial(leaf) || !st.NotAfter.Equal(leaf.NotAfter) || st.SPIFFEID != "spiffe://cluster.local/ns/default/sa/backend" {
		t.Errorf("status %+v does not describe the served leaf", st)
	}
	if want := leaf.NotBefore.Add(48 * time.Minute); st.RotateAt.Sub(want).Abs() > 2*time.Second {
		t.Errorf("rotate at %s, want 80%% of the lifetime (%s)", st.RotateAt, want)
	}
	// Asking for one name gets that one only.
	one, err := f.client.FetchSecrets(ctx, &discoverypb.DiscoveryRequest{ResourceNames: []string{SecretRootCA}})
	if err != nil || len(one.GetResources()) != 1 {
		t.Fatalf("FetchSecrets(ROOTCA) = %v, %v; want one resource", one, err)
	}
}

func TestSDSRotationPushesOnOpenStream(t *testing.T) {
	t.Parallel()
	f := startSDS(t, time.Second) // the CA's minimum: rotation at 0.8 s
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stream, err := f.client.StreamSecrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&discoverypb.DiscoveryRequest{TypeUrl: secretTypeURL, ResourceNames: []string{SecretDefault, SecretRootCA}}); err != nil {
		t.Fatal(err)
	}
	first, secs := recvSecrets(t, stream)
	leaf1 := checkSecrets(t, secs)
	// ACK it, as Envoy does; the ACK itself gets no answer, the rotation does.
	if err := stream.Send(&discoverypb.DiscoveryRequest{TypeUrl: secretTypeURL, VersionInfo: first.GetVersionInfo(),
		ResponseNonce: first.GetNonce(), ResourceNames: []string{SecretDefault, SecretRootCA}}); err != nil {
		t.Fatal(err)
	}
	second, secs := recvSecrets(t, stream)
	leaf2 := checkSecrets(t, secs)
	if serial(leaf1) == serial(leaf2) || second.GetVersionInfo() == first.GetVersionInfo() || second.GetNonce() == first.GetNonce() {
		t.Fatalf("rotation pushed the same certificate: %s then %s", first.GetVersionInfo(), second.GetVersionInfo())
	}
	if leaf2.NotAfter.Before(leaf1.NotAfter) {
		t.Errorf("new certificate expires %s, not after the old one's %s", leaf2.NotAfter, leaf1.NotAfter)
	}
	if st := f.certs.snapshot(); st.Rotations < 1 {
		t.Errorf("status rotations %d, want >= 1", st.Rotations)
	}
}

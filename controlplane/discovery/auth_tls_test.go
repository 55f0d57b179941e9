package discovery

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// testPKI is a root and certificates it signs.
type testPKI struct {
	root    *x509.Certificate
	rootKey *ecdsa.PrivateKey
	pool    *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test root"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(root)
	return &testPKI{root: root, rootKey: key, pool: pool}
}

// issue returns a certificate for the SPIFFE ID (and 127.0.0.1, for the server).
func (p *testPKI) issue(t *testing.T, spiffe string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(spiffe)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		URIs: []*url.URL{u}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.root, &key.PublicKey, p.rootKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestAuthTCPWorkloadCertificate: on TCP, a client that opens with TLS and presents a
// workload certificate is identified by it; one without a certificate needs a token as
// before, and plaintext clients are still served.
func TestAuthTCPWorkloadCertificate(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	m := helloModel()
	backend, frontend := m.Pod("backend-v1").NodeID(), m.Pod("frontend-v1").NodeID()
	const backendID = "spiffe://cluster.local/ns/default/sa/backend"
	authorize := func(ctx context.Context, node string) error {
		if c := PeerCertificate(ctx); c != nil {
			if node == backend && len(c.URIs) == 1 && c.URIs[0].String() == backendID {
				return nil
			}
			return errors.New("certificate is not the pod's")
		}
		if BearerToken(ctx) == "tok" && node == backend {
			return nil
		}
		return status.Error(codes.Unauthenticated, "no certificate and no token")
	}
	server := pki.issue(t, "spiffe://cluster.local/ns/istio-system/sa/istiod")
	s := startServer(t, Options{SocketGID: -1, TCPAddr: "127.0.0.1:0", Authorize: authorize,
		TCPTLS: &tls.Config{Certificates: []tls.Certificate{server}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pki.pool}})
	if err := s.Update(context.Background(), m); err != nil {
		t.Fatalf("Update: %v", err)
	}
	open := func(creds credentials.TransportCredentials, node string) (*discoverypb.DiscoveryResponse, error) {
		conn, err := grpc.NewClient(s.TCPAddr().String(), grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := discoverypb.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
		if err != nil {
			return nil, err
		}
		if err := st.Send(&discoverypb.DiscoveryRequest{TypeUrl: resource.ListenerType, Node: &core.Node{Id: node}}); err != nil {
			return nil, err
		}
		return st.Recv()
	}
	withCert := func(c *tls.Certificate) credentials.TransportCredentials {
		cfg := &tls.Config{RootCAs: pki.pool, ServerName: "127.0.0.1"}
		if c != nil {
			cfg.Certificates = []tls.Certificate{*c}
		}
		return credentials.NewTLS(cfg)
	}
	backendCert := pki.issue(t, backendID)
	if r, err := open(withCert(&backendCert), backend); err != nil || len(r.GetResources()) == 0 {
		t.Errorf("TLS with backend's certificate as backend: %v", err)
	}
	if _, err := open(withCert(&backendCert), frontend); status.Code(err) != codes.PermissionDenied {
		t.Errorf("TLS with backend's certificate as frontend: %v, want PermissionDenied", err)
	}
	if _, err := open(withCert(nil), backend); status.Code(err) != codes.Unauthenticated {
		t.Errorf("TLS without a certificate or token: %v, want Unauthenticated", err)
	}
	stranger := newTestPKI(t).issue(t, backendID)
	if _, err := open(withCert(&stranger), backend); err == nil {
		t.Error("TLS with a certificate of another root was served")
	}
	if _, err := open(insecure.NewCredentials(), backend); status.Code(err) != codes.Unauthenticated {
		t.Errorf("plaintext without a token: %v, want Unauthenticated (served as before)", err)
	}
	noTrace(t, s, frontend)
}

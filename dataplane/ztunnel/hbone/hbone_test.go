package hbone

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testCA is a throwaway mesh CA (meshlab's controlplane/ca is the lab's; the data plane's
// tests make their own, as a ztunnel only ever sees certificates).
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(tb testing.TB) *testCA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{"cluster.local"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return &testCA{cert: c, key: key, pool: pool}
}

func (ca *testCA) issue(tb testing.TB, id string) *tls.Certificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	u, _ := url.Parse(id)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		URIs: []*url.URL{u}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

const (
	clientID = "spiffe://cluster.local/ns/a/sa/client"
	serverID = "spiffe://cluster.local/ns/b/sa/server"
)

// fixture is a 15008 on loopback in front of an echo app.
type fixture struct {
	addr   netip.AddrPort
	app    netip.AddrPort
	seen   chan *ConnectRequest
	sni    atomic.Value
	dials  atomic.Int32
	ca     *testCA
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newFixture(tb testing.TB, deny string) *fixture {
	tb.Helper()
	f := &fixture{seen: make(chan *ConnectRequest, 16), ca: newCA(tb)}
	app, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f.app = app.Addr().(*net.TCPAddr).AddrPort()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f.addr = ln.Addr().(*net.TCPAddr).AddrPort()
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	serverCert := f.ca.issue(tb, serverID)
	cfg := ServerConfig(func() (*tls.Certificate, error) { return serverCert, nil }, func() *x509.CertPool { return f.ca.pool }, "cluster.local")
	cfg.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		f.sni.Store(h.ServerName)
		return nil, nil
	}
	log := slog.New(slog.DiscardHandler)
	f.wg.Add(2)
	go func() { // the echo app: echoes until the client half-closes, then closes
		defer f.wg.Done()
		for {
			c, err := app.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				Serve(ctx, c, cfg, func(ctx context.Context, r *ConnectRequest) (Upstream, int) {
					f.seen <- r
					if r.Authority.String() == deny {
						return Upstream{}, http.StatusUnauthorized
					}
					up, err := net.Dial("tcp", r.Authority.String())
					if err != nil {
						return Upstream{}, http.StatusServiceUnavailable
					}
					return Upstream{Conn: up}, http.StatusOK
				}, log)
			}()
		}
	}()
	tb.Cleanup(func() {
		cancel()
		_ = ln.Close()
		_ = app.Close()
		f.wg.Wait()
	})
	return f
}

func (f *fixture) request(tb testing.TB, cert *tls.Certificate, sans []string, authority netip.AddrPort) Request {
	tb.Helper()
	h := http.Header{}
	h.Set("baggage", "k8s.cluster.name=Kubernetes,k8s.namespace.name=a")
	h.Set("forwarded", `for="10.0.0.1:1234"`)
	return Request{
		Key:       KeyFor(clientID, sans, netip.MustParseAddr("10.0.0.1"), f.addr),
		Authority: authority,
		Header:    h,
		TLS:       ClientConfig(cert, f.ca.pool, sans),
		Dial: func(ctx context.Context, dst netip.AddrPort) (net.Conn, error) {
			f.dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, "tcp", dst.String())
		},
	}
}

func TestTunnelEchoAndHalfClose(t *testing.T) {
	f := newFixture(t, "")
	pool := NewPool()
	defer pool.Close()
	client := f.ca.issue(t, clientID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := pool.Connect(ctx, f.request(t, client, []string{serverID}, f.app))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := <-f.seen
	if r.Authority != f.app || r.PeerID != clientID {
		t.Errorf("server saw authority %s peer %q, want %s %q", r.Authority, r.PeerID, f.app, clientID)
	}
	if got := r.Header.Get("baggage"); !strings.Contains(got, "k8s.namespace.name=a") {
		t.Errorf("baggage = %q", got)
	}
	if got := r.Header.Get("forwarded"); got != `for="10.0.0.1:1234"` {
		t.Errorf("forwarded = %q", got)
	}
	if sni, _ := f.sni.Load().(string); sni != "" {
		t.Errorf("client sent SNI %q; ztunnel sends none", sni)
	}
	if _, err := s.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "hello" {
		t.Errorf("echo after half-close = %q, %v; want hello then EOF", got, err)
	}

	// A second stream to the same key reuses the connection.
	s2, err := pool.Connect(ctx, f.request(t, client, []string{serverID}, f.app))
	if err != nil {
		t.Fatal(err)
	}
	<-f.seen
	_ = s2.Close()
	if n := f.dials.Load(); n != 1 {
		t.Errorf("%d TCP connections for two streams of one key, want 1", n)
	}
}

func TestTunnelStatusAndIdentity(t *testing.T) {
	f := newFixture(t, "127.0.0.1:1")
	client := f.ca.issue(t, clientID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("denied is 401", func(t *testing.T) {
		pool := NewPool()
		defer pool.Close()
		_, err := pool.Connect(ctx, f.request(t, client, []string{serverID}, netip.MustParseAddrPort("127.0.0.1:1")))
		var se *StatusError
		if !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
			t.Errorf("err = %v, want a 401", err)
		}
		<-f.seen
	})
	t.Run("the server's identity must be one of the SANs", func(t *testing.T) {
		pool := NewPool()
		defer pool.Close()
		_, err := pool.Connect(ctx, f.request(t, client, []string{"spiffe://cluster.local/ns/b/sa/other"}, f.app))
		if err == nil || !strings.Contains(err.Error(), "peer identity") {
			t.Errorf("err = %v, want a peer identity mismatch", err)
		}
	})
	t.Run("a client of another trust domain is refused", func(t *testing.T) {
		pool := NewPool()
		defer pool.Close()
		foreign := f.ca.issue(t, "spiffe://other.domain/ns/a/sa/client")
		if _, err := pool.Connect(ctx, f.request(t, foreign, []string{serverID}, f.app)); err == nil {
			t.Error("a client certificate of another trust domain got a tunnel")
		}
	})
	t.Run("a client of another CA is refused", func(t *testing.T) {
		pool := NewPool()
		defer pool.Close()
		stranger := newCA(t).issue(t, clientID)
		if _, err := pool.Connect(ctx, f.request(t, stranger, []string{serverID}, f.app)); err == nil {
			t.Error("a client certificate of another CA got a tunnel")
		}
	})
	t.Run("no app is 503", func(t *testing.T) {
		pool := NewPool()
		defer pool.Close()
		_, err := pool.Connect(ctx, f.request(t, client, []string{serverID}, netip.MustParseAddrPort("127.0.0.1:2")))
		var se *StatusError
		if !errors.As(err, &se) || se.Code != http.StatusServiceUnavailable {
			t.Errorf("err = %v, want a 503", err)
		}
		<-f.seen
	})
}

func TestTLSVersionAndALPN(t *testing.T) {
	t.Parallel()
	ca := newCA(t)
	cfg := ClientConfig(ca.issue(t, clientID), ca.pool, []string{serverID})
	if cfg.MinVersion != tls.VersionTLS13 || cfg.MaxVersion != tls.VersionTLS13 || len(cfg.NextProtos) != 1 || cfg.NextProtos[0] != "h2" || cfg.ServerName != "" || cfg.ClientSessionCache != nil {
		t.Errorf("client config: versions %x-%x ALPN %v SNI %q cache %v", cfg.MinVersion, cfg.MaxVersion, cfg.NextProtos, cfg.ServerName, cfg.ClientSessionCache)
	}
	srv := ServerConfig(nil, nil, "cluster.local")
	if srv.ClientAuth != tls.RequireAnyClientCert || srv.MinVersion != tls.VersionTLS13 {
		t.Errorf("server config: client auth %v min version %x", srv.ClientAuth, srv.MinVersion)
	}
}

// BenchmarkTunnel pushes bytes through one HBONE stream on loopback (TLS 1.3, h2 windows as
// ztunnel's) to an echo app and reads them back: b.SetBytes is the payload one way.
func BenchmarkTunnel(b *testing.B) {
	f := newFixture(b, "")
	pool := NewPool()
	defer pool.Close()
	client := f.ca.issue(b, clientID)
	ctx := context.Background()
	s, err := pool.Connect(ctx, f.request(b, client, []string{serverID}, f.app))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	<-f.seen
	buf := make([]byte, 64<<10)
	back := make([]byte, 64<<10)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() {
		for range b.N {
			if _, err := s.Write(buf); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	total := 0
	for total < b.N*len(buf) {
		n, err := s.Read(back)
		if err != nil {
			b.Fatal(err)
		}
		total += n
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

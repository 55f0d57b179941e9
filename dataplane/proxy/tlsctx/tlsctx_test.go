package tlsctx

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx/tlstest"
)

var (
	istioCommon = tlstest.IstioCommon
	exact       = tlstest.Exact
	prefix      = tlstest.Prefix
)

func socket(tb testing.TB, m proto.Message) *corev3.TransportSocket {
	tb.Helper()
	return tlstest.Socket(tb, m)
}

func mustCompile(tb testing.TB, ts *corev3.TransportSocket, server bool) *Context {
	tb.Helper()
	c, err := Compile(ts, server)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

const (
	frontendID = "spiffe://cluster.local/ns/default/sa/frontend"
	backendID  = "spiffe://cluster.local/ns/default/sa/backend"
)

// pair runs a client and a server handshake over a pipe-like TCP connection pair and
// returns both results with the stats each side counted.
type result struct {
	conn *tls.Conn
	err  error
}

func handshakePair(t *testing.T, client, server *Context, cst, sst *Store, cscope, sscope stats.Scope) (result, result) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	srvCh := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srvCh <- result{err: err}
			return
		}
		tc, err := server.Handshake(context.Background(), c, sst, sscope)
		if err != nil {
			_ = c.Close()
		}
		srvCh <- result{conn: tc, err: err}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tc, cerr := client.Handshake(ctx, raw, cst, cscope)
	if cerr != nil {
		_ = raw.Close()
	}
	sr := <-srvCh
	t.Cleanup(func() {
		for _, c := range []*tls.Conn{tc, sr.conn} {
			if c != nil {
				_ = c.Close()
			}
		}
	})
	return result{conn: tc, err: cerr}, sr
}

// TestMutualTLSWithSPIFFESANs pins Envoy's default validator with Istio's contexts: the
// chain must lead to ROOTCA, a URI SAN must match, require_client_certificate refuses a
// client without a certificate, and each failure counts Envoy's ssl.* stats.
func TestMutualTLSWithSPIFFESANs(t *testing.T) {
	ca, other := tlstest.NewCA(t), tlstest.NewCA(t)
	tests := []struct {
		name        string
		clientSANs  []*matcherv3.StringMatcher
		clientCert  *tlsv3.Secret // nil: the client has no certificate secret
		serverRoots *tlstest.CA
		clientALPN  []string
		serverALPN  []string
		wantErr     bool
		clientStats map[string]int64
		serverStats map[string]int64
		wantALPN    string
	}{
		{
			name: "exact_uri_san_matches_destination_service_account", clientSANs: []*matcherv3.StringMatcher{exact(backendID)},
			clientALPN: []string{"istio-peer-exchange", "istio"}, serverALPN: []string{"istio-peer-exchange", "h2", "http/1.1"},
			wantALPN:    "istio-peer-exchange",
			clientStats: map[string]int64{"ssl.handshake": 1}, serverStats: map[string]int64{"ssl.handshake": 1},
		},
		{
			name: "prefix_uri_san_matches_trust_domain", clientSANs: []*matcherv3.StringMatcher{prefix("spiffe://cluster.local/")},
			clientStats: map[string]int64{"ssl.handshake": 1}, serverStats: map[string]int64{"ssl.handshake": 1},
		},
		{
			name: "no_shared_alpn_continues_without_a_protocol_as_boringssl", clientALPN: []string{"istio-http/1.1"}, serverALPN: []string{"h2"},
			clientStats: map[string]int64{"ssl.handshake": 1}, serverStats: map[string]int64{"ssl.handshake": 1},
		},
		{
			name: "wrong_san_is_refused_with_fail_verify_san", clientSANs: []*matcherv3.StringMatcher{exact("spiffe://cluster.local/ns/default/sa/reviews")},
			wantErr:     true,
			clientStats: map[string]int64{"ssl.connection_error": 1, "ssl.fail_verify_san": 1, "ssl.handshake": 0},
		},
		{
			name: "untrusted_root_is_refused_with_fail_verify_error", serverRoots: other, wantErr: true,
			serverStats: map[string]int64{"ssl.connection_error": 1, "ssl.fail_verify_error": 1},
		},
		{
			name: "missing_client_certificate_is_refused_with_fail_verify_no_cert", clientCert: &tlsv3.Secret{}, wantErr: true,
			serverStats: map[string]int64{"ssl.connection_error": 1, "ssl.fail_verify_no_cert": 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := &tlsv3.UpstreamTlsContext{CommonTlsContext: istioCommon(tc.clientALPN, tc.clientSANs...), Sni: "outbound_.8080_._.backend.default.svc.cluster.local"}
			if tc.clientCert != nil {
				up.CommonTlsContext.TlsCertificateSdsSecretConfigs = nil
			}
			down := &tlsv3.DownstreamTlsContext{CommonTlsContext: istioCommon(tc.serverALPN, prefix("spiffe://cluster.local/")), RequireClientCertificate: wrapperspb.Bool(true)}
			client, server := mustCompile(t, socket(t, up), false), mustCompile(t, socket(t, down), true)
			cst := storeWith(t, ca.Leaf(t, "default", frontendID), ca.Root("ROOTCA"))
			if tc.clientCert != nil {
				cst = storeWith(t, ca.Root("ROOTCA"))
			}
			roots := ca
			if tc.serverRoots != nil {
				roots = tc.serverRoots
			}
			sst := storeWith(t, ca.Leaf(t, "default", backendID), roots.Root("ROOTCA"))
			st := stats.NewStore()
			cr, sr := handshakePair(t, client, server, cst, sst, st.Cluster("outbound|8080||backend"), st.Listener("0.0.0.0:15006"))
			if tc.wantErr {
				if cr.err == nil && sr.err == nil {
					t.Fatal("handshake succeeded, want a TLS error")
				}
				var he *HandshakeError
				if cr.err != nil && !errors.As(cr.err, &he) {
					t.Errorf("client error %v is not a HandshakeError", cr.err)
				}
			} else {
				if cr.err != nil || sr.err != nil {
					t.Fatalf("handshake: client %v, server %v", cr.err, sr.err)
				}
				if got := cr.conn.ConnectionState().NegotiatedProtocol; got != tc.wantALPN {
					t.Errorf("ALPN = %q, want %q", got, tc.wantALPN)
				}
				if got := sr.conn.ConnectionState().PeerCertificates[0].URIs[0].String(); got != frontendID {
					t.Errorf("server saw peer %s, want %s", got, frontendID)
				}
			}
			for leaf, want := range tc.clientStats {
				if got := st.Value("cluster.outbound|8080||backend." + leaf); got != want {
					t.Errorf("cluster.outbound|8080||backend.%s = %d, want %d", leaf, got, want)
				}
			}
			for leaf, want := range tc.serverStats {
				if got := st.Value("listener.0.0.0.0_15006." + leaf); got != want {
					t.Errorf("listener.0.0.0.0_15006.%s = %d, want %d", leaf, got, want)
				}
			}
		})
	}
}

// TestRotationKeepsOpenConnections pins SDS rotation: a new `default` secret serves the
// next handshake while a connection made with the old certificate keeps working.
func TestRotationKeepsOpenConnections(t *testing.T) {
	ca := tlstest.NewCA(t)
	down := mustCompile(t, socket(t, &tlsv3.DownstreamTlsContext{CommonTlsContext: istioCommon(nil, prefix("spiffe://cluster.local/"))}), true)
	up := mustCompile(t, socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: istioCommon(nil, exact(backendID))}), false)
	cst := storeWith(t, ca.Leaf(t, "default", frontendID), ca.Root("ROOTCA"))
	sst := storeWith(t, ca.Leaf(t, "default", backendID), ca.Root("ROOTCA"))
	st := stats.NewStore()
	c1, s1 := handshakePair(t, up, down, cst, sst, st.Cluster("c"), st.Listener("l"))
	if c1.err != nil || s1.err != nil {
		t.Fatalf("first handshake: %v %v", c1.err, s1.err)
	}
	serial1 := c1.conn.ConnectionState().PeerCertificates[0].SerialNumber
	rotated, err := CompileSecret(ca.Leaf(t, "default", backendID), "v2")
	if err != nil {
		t.Fatal(err)
	}
	sst.Set(rotated)
	c2, s2 := handshakePair(t, up, down, cst, sst, st.Cluster("c"), st.Listener("l"))
	if c2.err != nil || s2.err != nil {
		t.Fatalf("handshake after rotation: %v %v", c2.err, s2.err)
	}
	if serial2 := c2.conn.ConnectionState().PeerCertificates[0].SerialNumber; serial2.Cmp(serial1) == 0 {
		t.Fatalf("new handshake still got serial %v after rotation", serial1)
	}
	// The connection made before the rotation still carries data both ways.
	go func() { _, _ = io.Copy(s1.conn, s1.conn) }()
	if _, err := io.WriteString(c1.conn, "ping"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	_ = c1.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c1.conn, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("old connection after rotation: %q %v", buf, err)
	}
}

// TestInspectDoesNotConsume pins tls_inspector: it reports TLS with SNI and ALPN, or
// plaintext, and the connection still yields every byte.
func TestInspectDoesNotConsume(t *testing.T) {
	ca := tlstest.NewCA(t)
	sst := storeWith(t, ca.Leaf(t, "default", backendID), ca.Root("ROOTCA"))
	down := mustCompile(t, socket(t, &tlsv3.DownstreamTlsContext{CommonTlsContext: istioCommon([]string{"h2", "http/1.1"})}), true)
	for _, tls := range []bool{true, false} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		type out struct {
			h    Hello
			data string
			err  error
		}
		ch := make(chan out, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				ch <- out{err: err}
				return
			}
			defer c.Close()
			h, conn := Inspect(c, time.Now().Add(5*time.Second))
			if h.TLS {
				tc, err := down.Handshake(context.Background(), conn, sst, stats.NewStore().Root())
				if err != nil {
					ch <- out{h: h, err: err}
					return
				}
				conn = tc
			}
			b := make([]byte, 5)
			_, err = io.ReadFull(conn, b)
			ch <- out{h: h, data: string(b), err: err}
		}()
		raw, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = raw.Close() })
		var w io.Writer = raw
		if tls {
			up := mustCompile(t, socket(t, &tlsv3.UpstreamTlsContext{Sni: "backend.example", CommonTlsContext: istioCommon([]string{"istio-http/1.1", "http/1.1"}, exact(backendID))}), false)
			cst := storeWith(t, ca.Leaf(t, "default", frontendID), ca.Root("ROOTCA"))
			tc, err := up.Handshake(context.Background(), raw, cst, stats.NewStore().Root())
			if err != nil {
				t.Fatal(err)
			}
			w = tc
		}
		if _, err := io.WriteString(w, "hello"); err != nil {
			t.Fatal(err)
		}
		got := <-ch
		if got.err != nil || got.data != "hello" {
			t.Fatalf("tls=%v: read %q, %v", tls, got.data, got.err)
		}
		if got.h.TLS != tls {
			t.Fatalf("tls=%v: inspector said TLS=%v", tls, got.h.TLS)
		}
		if tls && (got.h.ServerName != "backend.example" || strings.Join(got.h.ALPN, ",") != "istio-http/1.1,http/1.1") {
			t.Errorf("inspector saw SNI %q ALPN %v", got.h.ServerName, got.h.ALPN)
		}
	}
}

// TestCompileRefusesUnimplementedFields pins fieldcheck: what is not implemented is
// refused by name.
func TestCompileRefusesUnimplementedFields(t *testing.T) {
	tests := []struct {
		name string
		m    proto.Message
		want string
	}{
		{"ocsp_staple_policy", &tlsv3.DownstreamTlsContext{OcspStaplePolicy: tlsv3.DownstreamTlsContext_STRICT_STAPLING}, "typed_config.ocsp_staple_policy"},
		{"static_tls_certificates", &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{TlsCertificates: []*tlsv3.TlsCertificate{{}}}}, "common_tls_context.tls_certificates"},
		{"san_regex", &tlsv3.UpstreamTlsContext{CommonTlsContext: istioCommon(nil, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "x"}})}, "matcher.suffix"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, server := tc.m.(*tlsv3.DownstreamTlsContext)
			_, err := Compile(socket(t, tc.m), server)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// wireConn keeps every byte read from the wire, to read the TLS records' lengths.
type wireConn struct {
	net.Conn
	wire []byte
}

func (c *wireConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.wire = append(c.wire, p[:n]...)
	return n, err
}

// largestRecord returns the longest TLS record in wire bytes (its header's length).
func largestRecord(wire []byte) int {
	largest := 0
	for len(wire) >= 5 {
		n := int(wire[3])<<8 | int(wire[4])
		largest = max(largest, n)
		if len(wire) < 5+n {
			break
		}
		wire = wire[5+n:]
	}
	return largest
}

// TestRecordsAreNotSizedDynamically: BoringSSL (Envoy's) fills a record up to 16 KB from
// a connection's first write; crypto/tls's dynamic record sizing would cut the first
// records to a TCP segment each (about 1.2 KB, then growing), one write(2) per record.
// Each side writes 8 KB at once after the handshake: the peer must read it as one record.
func TestRecordsAreNotSizedDynamically(t *testing.T) {
	ca := tlstest.NewCA(t)
	down := mustCompile(t, socket(t, &tlsv3.DownstreamTlsContext{CommonTlsContext: istioCommon(nil, prefix("spiffe://cluster.local/"))}), true)
	up := mustCompile(t, socket(t, &tlsv3.UpstreamTlsContext{CommonTlsContext: istioCommon(nil, exact(backendID))}), false)
	cst := storeWith(t, ca.Leaf(t, "default", frontendID), ca.Root("ROOTCA"))
	sst := storeWith(t, ca.Leaf(t, "default", backendID), ca.Root("ROOTCA"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	payload := strings.Repeat("x", 8<<10)
	type side struct {
		wire *wireConn
		err  error
	}
	exchange := func(tc *tls.Conn) error {
		errc := make(chan error, 1)
		go func() { _, err := io.WriteString(tc, payload); errc <- err }()
		if _, err := io.ReadFull(tc, make([]byte, len(payload))); err != nil {
			return err
		}
		return <-errc
	}
	srv := make(chan side, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			srv <- side{err: err}
			return
		}
		rc := &wireConn{Conn: c}
		tc, err := down.Handshake(context.Background(), rc, sst, stats.NewStore().Listener("0.0.0.0:15006"))
		if err == nil {
			err = exchange(tc)
		}
		_ = c.Close()
		srv <- side{wire: rc, err: err}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rc := &wireConn{Conn: raw}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tc, err := up.Handshake(ctx, rc, cst, stats.NewStore().Cluster("outbound|8080||backend"))
	if err == nil {
		err = exchange(tc)
	}
	s := <-srv
	if err != nil || s.err != nil {
		t.Fatalf("exchange: client %v, server %v", err, s.err)
	}
	if got := largestRecord(rc.wire); got < len(payload) {
		t.Errorf("the client read the server's 8 KB write in records of at most %d bytes, want one record (no dynamic record sizing)", got)
	}
	if got := largestRecord(s.wire.wire); got < len(payload) {
		t.Errorf("the server read the client's 8 KB write in records of at most %d bytes, want one record (no dynamic record sizing)", got)
	}
}

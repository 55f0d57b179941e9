package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
)

// TestRoundTripUpstreamReportsTheLocalAddress pins %UPSTREAM_LOCAL_ADDRESS%: the proxy's
// end of the connection the request went out on, which is the peer the upstream saw, on
// both the pooled HTTP/1.1 path and the http.Transport path.
func TestRoundTripUpstreamReportsTheLocalAddress(t *testing.T) {
	var mu sync.Mutex
	var peers []string
	srv, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		peers = append(peers, r.RemoteAddr)
		mu.Unlock()
	})
	cl, _ := run(t, &clusterv3.Cluster{Name: "ul", LoadAssignment: cla("ul", nil, srv.Listener.Addr().String())})
	for _, tc := range []struct {
		name string
		req  func() *http.Request
	}{
		{name: "pooled_http1_get", req: func() *http.Request { r, _ := http.NewRequest("GET", "http://x/", nil); return r }},
		{name: "transport_unreplayable_post", req: func() *http.Request {
			r, _ := http.NewRequest("POST", "http://x/", io.NopCloser(strings.NewReader("body")))
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := cl.Pick(netip.AddrPort{})
			if err != nil {
				t.Fatal(err)
			}
			var up UpstreamInfo
			resp, err := cl.RoundTripUpstream(tc.req(), h, &up)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			last := peers[len(peers)-1]
			mu.Unlock()
			if up.LocalAddr == nil || up.LocalAddr.String() != last {
				t.Errorf("upstream local address %v, the upstream saw the request from %s", up.LocalAddr, last)
			}
		})
	}
}

// TestTransportFailureReasonAsEnvoyWritesIt pins the upstream transport failure reasons:
// BoringSSL's queue entries in Envoy's TLS_error frame for the failures Envoy names, Go's
// error text in the same frame otherwise, and nothing for failures outside TLS.
func TestTransportFailureReasonAsEnvoyWritesIt(t *testing.T) {
	// A real crypto/tls client against a plaintext server: the record header error.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
		c.Close()
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	plaintextErr := tls.Client(raw, &tls.Config{InsecureSkipVerify: true}).HandshakeContext(ctx)
	if plaintextErr == nil {
		t.Fatal("handshake with a plaintext server succeeded")
	}

	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{name: "certificate_refused_by_validator_is_CERTIFICATE_VERIFY_FAILED",
			err:  &tlsctx.HandshakeError{Err: &tlsctx.VerifyError{Stat: "fail_verify_error", Err: errors.New("x509: unknown authority")}},
			want: "TLS_error:|268435581:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED:TLS_error_end"},
		{name: "san_mismatch_adds_the_validator_detail",
			err:  fmt.Errorf("connect to 10.0.0.1:80: %w", &net.OpError{Op: "dial", Err: &tlsctx.HandshakeError{Err: &tlsctx.VerifyError{Stat: "fail_verify_san", Err: errors.New("san")}}}),
			want: "TLS_error:|268435581:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED:verify cert failed: verify SAN list:TLS_error_end"},
		{name: "plaintext_peer_is_WRONG_VERSION_NUMBER",
			err:  &tlsctx.HandshakeError{Err: plaintextErr},
			want: "TLS_error:|268435703:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER:TLS_error_end"},
		{name: "other_handshake_failure_carries_gos_error",
			err:  &tlsctx.HandshakeError{Err: errors.New("remote error: tls: bad certificate")},
			want: "TLS_error:|remote error: tls: bad certificate:TLS_error_end"},
		{name: "handshake_timeout_has_no_reason", err: &tlsctx.HandshakeError{Err: context.DeadlineExceeded}},
		{name: "refused_connection_has_no_reason", err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}},
		{name: "nil_has_no_reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TransportFailureReason(tc.err); got != tc.want {
				t.Errorf("TransportFailureReason(%v)\n got %q\nwant %q", tc.err, got, tc.want)
			}
		})
	}
}

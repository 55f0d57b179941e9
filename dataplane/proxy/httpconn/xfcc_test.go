package httpconn

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx/tlstest"
)

// TestXFCCModes pins Envoy's mutateXfccRequestHeader for each forward_client_cert_details.
func TestXFCCModes(t *testing.T) {
	ca := tlstest.NewCA(t)
	leaf := func(id string) *tls.Certificate {
		sec, err := tlsctx.CompileSecret(ca.Leaf(t, "default", id), "1")
		if err != nil {
			t.Fatal(err)
		}
		return sec.Cert
	}
	client, server := leaf("spiffe://td/ns/a/sa/client"), leaf("spiffe://td/ns/b/sa/server")
	mtls := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{client.Leaf}}
	const incoming = "By=spiffe://td/ns/x/sa/gw;URI=spiffe://td/ns/y/sa/edge"
	tests := []struct {
		name string
		cfg  XFCC
		cs   *tls.ConnectionState
		want string // "" means removed; a prefix "+" means the incoming value then ","
	}{
		{name: "sanitize_removes", cfg: XFCC{Mode: XFCCSanitize}, cs: mtls, want: ""},
		{name: "forward_only_keeps", cfg: XFCC{Mode: XFCCForwardOnly}, cs: mtls, want: incoming},
		{name: "always_forward_only_keeps_without_tls", cfg: XFCC{Mode: XFCCAlwaysForwardOnly}, want: incoming},
		{name: "append_forward_without_client_cert_removes", cfg: XFCC{Mode: XFCCAppendForward, URI: true}, want: ""},
		{name: "append_forward_appends", cfg: XFCC{Mode: XFCCAppendForward, URI: true}, cs: mtls, want: incoming + ",By=spiffe://td/ns/b/sa/server;Hash="},
		{name: "sanitize_set_replaces", cfg: XFCC{Mode: XFCCSanitizeSet, URI: true, Subject: true}, cs: mtls, want: "By=spiffe://td/ns/b/sa/server;Hash="},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			h.Set(xfccHeader, incoming)
			tc.cfg.apply(h, tc.cs, server.Leaf)
			got := h.Get(xfccHeader)
			if tc.want == "" {
				if _, present := h[xfccHeader]; present {
					t.Fatalf("x-forwarded-client-cert = %q, want it removed", got)
				}
				return
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("x-forwarded-client-cert = %q, want prefix %q", got, tc.want)
			}
			if tc.cfg.URI && !strings.HasSuffix(got, ";URI=spiffe://td/ns/a/sa/client") {
				t.Errorf("x-forwarded-client-cert = %q, want the client's URI last", got)
			}
			if tc.cfg.Subject && !strings.Contains(got, `;Subject="";`) {
				t.Errorf("x-forwarded-client-cert = %q, want Subject=\"\"", got)
			}
		})
	}
}

package httpconn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/istiostats"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// spiffeCert returns a self-signed certificate whose URI SAN is spiffe.
func spiffeCert(tb testing.TB, spiffe string) tls.Certificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	u, err := url.Parse(spiffe)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), URIs: []*url.URL{u}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// TestOutboundPeerSANPerUpstream pins istio.stats' destination_principal of outbound
// mTLS requests when one downstream connection alternates between two upstream peers:
// the SANs formatted once per peer certificate must follow the peer of each request.
func TestOutboundPeerSANPerUpstream(t *testing.T) {
	t.Parallel()
	var clusters []*cluster.Config
	for _, name := range []string{"a", "b"} {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) }))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{spiffeCert(t, "spiffe://cluster.local/ns/"+name+"/sa/"+name)}}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		clusters = append(clusters, tlsCluster(t, "outbound|80||"+name, srv.Listener.Addr().String(), ""))
	}
	mutate := func(h *hcmv3.HttpConnectionManager) {
		stats := &hcmv3.HttpFilter{Name: "istio.stats", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: typedStructAny(t, istiostats.ConfigType, map[string]any{})}}
		h.HttpFilters = append([]*hcmv3.HttpFilter{stats}, h.HttpFilters...)
	}
	l := newLabHCM(t, mutate, clusters, routeTo(prefix("/a"), to("outbound|80||a")), routeTo(prefix("/b"), to("outbound|80||b")))
	for range 3 {
		for _, name := range []string{"a", "b"} {
			if resp, body := l.get(t, "/"+name); resp.StatusCode != 200 || body != name {
				t.Fatalf("GET /%s: status %d body %q", name, resp.StatusCode, body)
			}
		}
	}
	var prom strings.Builder
	if err := l.store.WritePrometheus(&prom, stats.Filter{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		want := `destination_principal="spiffe://cluster.local/ns/` + name + `/sa/` + name + `"`
		n := 0
		for _, line := range strings.Split(prom.String(), "\n") {
			if strings.HasPrefix(line, "istio_requests_total{") && strings.Contains(line, want) {
				if !strings.HasSuffix(line, " 3") {
					t.Errorf("want 3 requests: %s", line)
				}
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d istio_requests_total series with %s, want 1:\n%s", n, want, prom.String())
		}
	}
}

// TestUpstreamSANsFormattedOncePerPeer pins that an outbound request to the same peer
// certificate, cluster and host reuses the SANs formatted for the first, and that a
// different peer certificate or host gets its own.
func TestUpstreamSANsFormattedOncePerPeer(t *testing.T) {
	// Not parallel: testing.AllocsPerRun.
	a, b := spiffeCert(t, "spiffe://cluster.local/ns/a/sa/a").Leaf, spiffeCert(t, "spiffe://cluster.local/ns/b/sa/b").Leaf
	host := cluster.Host{Addr: netip.MustParseAddrPort("10.0.0.1:80")}
	rt := &router{}
	if n := testing.AllocsPerRun(100, func() { rt.upstreamSANs(a, nil, host) }); n != 0 {
		t.Errorf("upstreamSANs allocates %v objects per request to the same peer, want 0", n)
	}
	if got := rt.upstreamSANs(b, nil, host).peer; got != "spiffe://cluster.local/ns/b/sa/b" {
		t.Errorf("peer SAN after the peer changed: %q", got)
	}
	other := cluster.Host{Addr: netip.MustParseAddrPort("10.0.0.2:80")}
	if s := rt.upstreamSANs(b, nil, other); s.host != other || s.peer != "spiffe://cluster.local/ns/b/sa/b" {
		t.Errorf("entry after the host changed: %+v", s)
	}
}

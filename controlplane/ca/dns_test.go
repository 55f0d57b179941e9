package ca

import (
	"crypto/tls"
	"crypto/x509"
	"slices"
	"testing"
	"time"
)

// TestSignDNS: a DNS certificate names the DNS names asked for, pairs with its key and
// verifies up to the CA's roots; a plugged-in CA's intermediate is in its chain and
// the root is not (it goes in root-cert.pem).
func TestSignDNS(t *testing.T) {
	t.Parallel()
	names := []string{"example1.istio-system.svc", "example1.istio-system"}
	plugged := newCA(t, Options{})
	p, err := ParsePlugged(pluggedFiles(t), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := plugged.Plug(p); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		ca    *CA
		certs int
	}{
		{name: "lab root", ca: newCA(t, Options{}), certs: 1},
		{name: "plugged-in intermediate", ca: plugged, certs: 2},
	} {
		c, err := tc.ca.SignDNS(names, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(c.ChainPEM, c.KeyPEM)
		if err != nil {
			t.Fatalf("%s: key pair: %v", tc.name, err)
		}
		if len(pair.Certificate) != tc.certs {
			t.Errorf("%s: cert-chain.pem holds %d certificates, want %d", tc.name, len(pair.Certificate), tc.certs)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(leaf.DNSNames, names) {
			t.Errorf("%s: DNS names %q, want %q", tc.name, leaf.DNSNames, names)
		}
		roots, inter := x509.NewCertPool(), x509.NewCertPool()
		if !roots.AppendCertsFromPEM(c.RootPEM) {
			t.Fatalf("%s: root-cert.pem holds no certificate", tc.name)
		}
		for _, der := range pair.Certificate[1:] {
			ic, _ := x509.ParseCertificate(der)
			inter.AddCert(ic)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: names[0], Roots: roots, Intermediates: inter}); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

package ca

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
)

// pluggedFiles makes a cacerts Secret's files as Istio's tools/certs does: an RSA root,
// an RSA intermediate it signs (PKCS#8 key), cert-chain.pem the intermediate then the
// root. RSA 2048 rather than the Makefile's 4096, for speed.
func pluggedFiles(tb testing.TB) map[string][]byte {
	tb.Helper()
	now := time.Now()
	mk := func(cn string, parent *x509.Certificate, parentKey *rsa.PrivateKey) (*x509.Certificate, *rsa.PrivateKey) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			tb.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{Organization: []string{"Istio"}, CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
		signer, signerKey := tmpl, key
		if parent != nil {
			signer, signerKey = parent, parentKey
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
		if err != nil {
			tb.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			tb.Fatal(err)
		}
		return c, key
	}
	root, rootKey := mk("Root CA", nil, nil)
	inter, interKey := mk("Intermediate CA", root, rootKey)
	keyDER, err := x509.MarshalPKCS8PrivateKey(interKey)
	if err != nil {
		tb.Fatal(err)
	}
	certPEM := func(c *x509.Certificate) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return map[string][]byte{
		PluggedCertFile:  certPEM(inter),
		PluggedKeyFile:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		PluggedChainFile: append(certPEM(inter), certPEM(root)...),
		PluggedRootFile:  certPEM(root),
	}
}

// TestPluggedChain: a CA plugged with an RSA intermediate signs leaves sent as istiod's
// CreateCertificate sends them, [leaf, cert-chain.pem..., root-cert.pem], that verify
// up to the plugged-in root; its roots are the bundle, and root rotations are refused.
func TestPluggedChain(t *testing.T) {
	t.Parallel()
	files := pluggedFiles(t)
	p, err := ParsePlugged(files, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := newCA(t, Options{})
	if err := c.Plug(p); err != nil {
		t.Fatal(err)
	}
	if !c.PluggedIn() {
		t.Error("PluggedIn after Plug = false")
	}
	chain, err := c.Sign(csrFor(t, []string{backend.SPIFFEID(DefaultTrustDomain)}), backend, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) != 4 || chain[1] != pemCert(p.Chain[0].Raw) ||
		chain[2] != pemCert(p.Chain[1].Raw) || chain[3] != pemCert(p.Roots[0].Raw) {
		t.Fatalf("chain has %d certificates, want [leaf, intermediate, root, root]", len(chain))
	}
	b, _ := pem.Decode([]byte(chain[0]))
	leaf, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots, inters := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(p.Roots[0])
	inters.AddCert(p.Chain[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inters, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("leaf does not verify up to the plugged-in root: %v", err)
	}
	if got := string(c.RootPEM()); got != string(files[PluggedRootFile]) {
		t.Errorf("RootPEM = %q, want root-cert.pem", got)
	}
	if st := c.State(); st.CrossSigned != nil || len(st.Bundle) != 1 || st.Signing.Subject != "Intermediate CA" {
		t.Errorf("state %+v, want the intermediate signing, the root alone in the bundle, no cross certificate", st)
	}
	next, err := NewRoot(DefaultTrustDomain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddRoot(next); !errors.Is(err, ErrPlugged) {
		t.Errorf("AddRoot on a plugged-in CA: %v, want ErrPlugged", err)
	}
}

// TestParsePluggedErrors: each bad cacerts file is named.
func TestParsePluggedErrors(t *testing.T) {
	t.Parallel()
	good := pluggedFiles(t)
	other := pluggedFiles(t)
	for _, tc := range []struct {
		name   string
		mutate func(map[string][]byte)
		want   string
	}{
		{name: "missing key", mutate: func(f map[string][]byte) { delete(f, PluggedKeyFile) }, want: "ca-key.pem: missing or empty"},
		{name: "key of another certificate", mutate: func(f map[string][]byte) { f[PluggedKeyFile] = other[PluggedKeyFile] }, want: "the key does not match the certificate"},
		{name: "chain not PEM", mutate: func(f map[string][]byte) { f[PluggedChainFile] = []byte("junk") }, want: "cert-chain.pem: no PEM CERTIFICATE block"},
		{name: "another root", mutate: func(f map[string][]byte) { f[PluggedRootFile] = other[PluggedRootFile] }, want: "ca-cert.pem does not verify up to root-cert.pem through cert-chain.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			files := map[string][]byte{}
			for k, v := range good {
				files[k] = v
			}
			tc.mutate(files)
			if _, err := ParsePlugged(files, time.Now()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParsePlugged: %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzParsePlugged: any cacerts data parses or is refused, never panics, and what
// parses signs.
func FuzzParsePlugged(f *testing.F) {
	files := pluggedFiles(f)
	f.Add(files[PluggedCertFile], files[PluggedKeyFile], files[PluggedChainFile], files[PluggedRootFile])
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), []byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, cert, key, chain, root []byte) {
		p, err := ParsePlugged(map[string][]byte{PluggedCertFile: cert, PluggedKeyFile: key, PluggedChainFile: chain, PluggedRootFile: root}, time.Now())
		if err != nil {
			return
		}
		if p.Signing == nil || p.Signing.Key == nil || len(p.Chain) == 0 || len(p.Roots) == 0 {
			t.Fatalf("ParsePlugged returned %+v without error", p)
		}
	})
}

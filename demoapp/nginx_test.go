package demoapp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The nginx persona speaks TLS only: for each server name it presents a certificate for
// that name, signed by its own CA (the same CA for every name), and answers nginx's
// welcome page; plaintext HTTP gets no answer; it stops when its context ends.
func TestNginxServesTLSWithItsOwnCertificatePerSNI(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- serveNginx(ctx, []net.Listener{ln}, "my-nginx-abc", "", slog.New(slog.DiscardHandler)) }()

	var issuers []string
	for _, sni := range []string{"nginx.example.com", "other.example.org"} {
		var seen *x509.Certificate
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			ServerName: sni, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, //nolint:gosec // the test inspects the certificate itself
			VerifyConnection: func(cs tls.ConnectionState) error { seen = cs.PeerCertificates[0]; return nil },
		}}}
		resp, err := client.Get("https://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatalf("GET with SNI %s: %v", sni, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		client.CloseIdleConnections()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "<title>Welcome to nginx!</title>") || resp.Header.Get("Server") != "nginx" {
			t.Errorf("SNI %s: %d %q server %q", sni, resp.StatusCode, body, resp.Header.Get("Server"))
		}
		if seen.Subject.CommonName != sni || len(seen.DNSNames) != 1 || seen.DNSNames[0] != sni {
			t.Errorf("SNI %s: certificate for %s %v", sni, seen.Subject.CommonName, seen.DNSNames)
		}
		issuers = append(issuers, seen.Issuer.CommonName)
	}
	if issuers[0] != "my-nginx-abc nginx CA" || issuers[1] != issuers[0] {
		t.Errorf("issuers = %q, want the pod's own CA for both", issuers)
	}

	// Plain HTTP is a TLS handshake failure, as on the task's nginx.
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	b, _ := io.ReadAll(c)
	c.Close()
	if strings.Contains(string(b), "Welcome to nginx") {
		t.Errorf("plaintext HTTP answered: %q", b)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serveNginx = %v after its context ended", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serveNginx did not return after its context ended")
	}
}

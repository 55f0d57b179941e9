package demoapp

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a CA that signs leaf certificates, as the task's openssl commands make them.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf returns a certificate (CN only, no extensions, as `openssl x509 -req` makes it)
// and its key, in PEM.
func (ca *testCA) leaf(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd})
}

// The task's nginx.conf, as the egress TLS origination task writes it.
const taskNginxConf = `events {
}

http {
  log_format main '$remote_addr - $remote_user [$time_local]  $status '
  '"$request" $body_bytes_sent "$http_referer" '
  '"$http_user_agent" "$http_x_forwarded_for"';
  access_log /var/log/nginx/access.log main;
  error_log  /var/log/nginx/error.log;

  server {
    listen 443 ssl;

    root /usr/share/nginx/html;
    index index.html;

    server_name my-nginx.mesh-external.svc.cluster.local;
    ssl_certificate /etc/nginx-server-certs/tls.crt;
    ssl_certificate_key /etc/nginx-server-certs/tls.key;
    ssl_client_certificate /etc/nginx-ca-certs/example.com.crt;
    ssl_verify_client on; # the task's mutual TLS
  }
}
`

// With the task's nginx.conf and volumes, the persona presents the Secret's server
// certificate and, as nginx with ssl_verify_client on, answers 400 "No required SSL
// certificate was sent" without a client certificate, 400 "The SSL certificate error"
// to one of another CA, and the welcome page to one the configured CA signed.
func TestNginxConfMutualTLS(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "example.com")
	root := t.TempDir()
	write := func(p string, b []byte) {
		t.Helper()
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srvCert, srvKey := ca.leaf(t, "my-nginx.mesh-external.svc.cluster.local")
	write("/etc/nginx/nginx.conf", []byte(taskNginxConf))
	write("/etc/nginx-server-certs/tls.crt", srvCert)
	write("/etc/nginx-server-certs/tls.key", srvKey)
	write("/etc/nginx-ca-certs/example.com.crt", ca.pem)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- serveNginx(ctx, []net.Listener{ln}, "my-nginx-abc", root, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { cancel(); <-done })

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	get := func(certs []tls.Certificate) (int, string) {
		t.Helper()
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, ServerName: "my-nginx.mesh-external.svc.cluster.local", Certificates: certs, MinVersion: tls.VersionTLS12,
			// The server certificate has no SAN (CN only, as the task's); verify its chain.
			InsecureSkipVerify: true, //nolint:gosec // verified below against roots
			VerifyConnection: func(cs tls.ConnectionState) error {
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots})
				return err
			},
		}}}
		defer client.CloseIdleConnections()
		resp, err := client.Get("https://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatalf("GET: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(nil); code != 400 || !strings.Contains(body, "<title>400 No required SSL certificate was sent</title>") {
		t.Errorf("without a client certificate: %d %q", code, body)
	}
	cc, ck := ca.leaf(t, "client.example.com")
	good, err := tls.X509KeyPair(cc, ck)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get([]tls.Certificate{good}); code != 200 || !strings.Contains(body, "<title>Welcome to nginx!</title>") {
		t.Errorf("with the client certificate: %d %q", code, body)
	}
	oc, ok := newTestCA(t, "other").leaf(t, "client.example.com")
	bad, err := tls.X509KeyPair(oc, ok)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get([]tls.Certificate{bad}); code != 400 || !strings.Contains(body, "The SSL certificate error") {
		t.Errorf("with a client certificate of another CA: %d %q", code, body)
	}

	// A bad directive stops nginx at start, as its [emerg] does.
	write("/etc/nginx/nginx.conf", []byte(strings.Replace(taskNginxConf, "ssl_verify_client on", "ssl_verify_client maybe", 1)))
	if _, err := readNginxConf(root); err == nil || !strings.Contains(err.Error(), `invalid value "maybe" in "ssl_verify_client"`) {
		t.Errorf("ssl_verify_client maybe: %v", err)
	}
	write("/etc/nginx/nginx.conf", []byte(strings.Replace(taskNginxConf, "/etc/nginx-server-certs/tls.key", "/etc/nope.key", 1)))
	if _, err := readNginxConf(root); err == nil || !strings.Contains(err.Error(), `ssl_certificate_key "/etc/nope.key"`) {
		t.Errorf("a missing key file: %v", err)
	}
}

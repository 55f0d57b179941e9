package e2e

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestIngressGateway runs Istio's ingress task on Bookinfo as the docs write it: the
// sample's Deployments, the bookinfo-gateway Gateway and its VirtualService; the lab
// brings istio-system/istio-ingressgateway and prints how to reach it; from the host,
// `meshlab port-forward -n istio-system svc/istio-ingressgateway LOCAL:80` and
// `curl http://$GATEWAY_URL/productpage` give the product page, a path the
// VirtualService does not route gives 404, and once the Gateway names one host, another
// host gives 404. Then ingress TLS: a kubernetes.io/tls Secret and an HTTPS server with
// credentialName serve the product page over TLS on 443 for that host.
func TestIngressGateway(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	bookinfo, err := os.ReadFile("testdata/kube-bookinfo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := os.ReadFile("testdata/bookinfo-gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scenario := filepath.Join(t.TempDir(), "bookinfo-ingress.yaml")
	if err := os.WriteFile(scenario, []byte(string(bookinfo)+"\n---\n"+string(gw)), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLab(t, scenario)
	// up prints how to reach the gateway after its "is up" line, which startLab waits for.
	says := func(out string) bool {
		return strings.Contains(out, "svc/istio-ingressgateway 8080:80") && strings.Contains(out, "GATEWAY_URL=127.0.0.1:8080")
	}
	for deadline := time.Now().Add(10 * time.Second); !says(l.out.String()) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if out := l.out.String(); !says(out) {
		t.Errorf("up does not say how to reach the ingress gateway:\n%s", out)
	}
	url := "http://" + portForward(t, l.name, "80") + "/productpage"
	get := func(host, url string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor := func(what string, ok func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			good, last := ok()
			if good {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30s; last: %s", what, last)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitFor("GET /productpage through the ingress gateway", func() (bool, string) {
		code, body := get("", url)
		return code == 200 && strings.Contains(body, "<title>Simple Bookstore App</title>"), fmt.Sprintf("%d %.300s", code, body)
	})
	if code, body := get("", strings.TrimSuffix(url, "/productpage")+"/nothing"); code != 404 {
		t.Errorf("GET /nothing = %d %.200s, want 404 (no route)", code, body)
	}

	// The Gateway and VirtualService now name one host, as the docs' httpbin.example.com.
	hostOnly := strings.ReplaceAll(string(gw), `"*"`, "bookinfo.example.com")
	if out, err := meshlab(t, "apply", "--wait", "--name", l.name, "-f", writeTemp(t, "host.yaml", hostOnly)); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	waitFor("a host the Gateway does not list gives 404", func() (bool, string) {
		code, body := get("other.example.com", url)
		return code == 404, fmt.Sprintf("%d %.200s", code, body)
	})
	if code, body := get("bookinfo.example.com", url); code != 200 || !strings.Contains(body, "Simple Bookstore App") {
		t.Errorf("GET with Host bookinfo.example.com = %d %.300s", code, body)
	}

	// Ingress TLS (SIMPLE): the task's `kubectl create -n istio-system secret tls`.
	certPEM, keyPEM, pool := selfSigned(t, "bookinfo.example.com")
	b64 := base64.StdEncoding.EncodeToString
	tlsObjects := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: bookinfo-credential, namespace: istio-system}
type: kubernetes.io/tls
data: {tls.crt: %s, tls.key: %s}
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: bookinfo-gateway}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 443, name: https, protocol: HTTPS}
    tls: {mode: SIMPLE, credentialName: bookinfo-credential}
    hosts: [bookinfo.example.com]
`, b64(certPEM), b64(keyPEM))
	if out, err := meshlab(t, "apply", "--wait", "--name", l.name, "-f", writeTemp(t, "tls.yaml", tlsObjects)); err != nil {
		t.Fatalf("apply TLS: %v\n%s", err, out)
	}
	tlsAddr := portForward(t, l.name, "443")
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "bookinfo.example.com", MinVersion: tls.VersionTLS12},
	}}
	waitFor("GET https://bookinfo.example.com/productpage", func() (bool, string) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+tlsAddr+"/productpage", nil)
		req.Host = "bookinfo.example.com"
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && strings.Contains(string(b), "Simple Bookstore App"), fmt.Sprintf("%d %.200s", resp.StatusCode, b)
	})
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// portForward runs `meshlab port-forward -n istio-system svc/istio-ingressgateway
// :REMOTE` for the test's life and returns the local address it listens on.
func portForward(t *testing.T, lab, remote string) string {
	t.Helper()
	cmd := exec.Command(meshlabBin(t), "port-forward", "--name", lab, "-n", "istio-system", "svc/istio-ingressgateway", ":"+remote)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if a, ok := strings.CutPrefix(line, "Forwarding from "); ok {
				a, _, _ = strings.Cut(a, " ")
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		if host, _, _ := net.SplitHostPort(a); host != "127.0.0.1" {
			t.Fatalf("port-forward listens on %s, want 127.0.0.1", a)
		}
		return a
	case <-time.After(20 * time.Second):
		t.Fatal("port-forward printed no Forwarding line")
	}
	return ""
}

func selfSigned(t *testing.T, host string) (certPEM, keyPEM []byte, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: host, Organization: []string{"example Inc."}},
		DNSNames: []string{host}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), pool
}

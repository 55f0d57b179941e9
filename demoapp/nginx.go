package demoapp

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The nginx persona stands in for the TLS servers of Istio's tasks that run the nginx
// image. Without an nginx.conf among its volumes (the "ingress gateway without TLS
// termination" task's nginx-server-certs are mounted but meshlab's persona then needs
// no config) it presents, for each server name a client asks for (SNI), a certificate
// of its own minted by a CA that lives only in this process ("<pod> nginx CA"). With
// the pod's /etc/nginx/nginx.conf (a ConfigMap volume, as the egress TLS origination
// task mounts it) it reads the TLS directives of its server as nginx does:
// ssl_certificate and ssl_certificate_key (the task's nginx-server-certs Secret),
// ssl_client_certificate and ssl_verify_client. With ssl_verify_client on, a client
// without a certificate, or with one its CA did not sign, gets nginx's 400 page ("No
// required SSL certificate was sent", "The SSL certificate error"), as the task shows.
// Plain HTTP is not served: like the tasks' nginx.conf, every declared port speaks TLS.

// PersonaNginx serves nginx's welcome page over TLS on every port.
const PersonaNginx = "nginx"

// nginxWelcome is the start of nginx's default index page, what the task's curl shows.
const nginxWelcome = "<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to nginx!</title>\n</head>\n<body>\n<h1>Welcome to nginx!</h1>\n</body>\n</html>\n"

// serveNginx serves nginx's welcome page over TLS on every listener until ctx ends,
// configured by the nginx.conf below volumeRoot when there is one.
func serveNginx(ctx context.Context, lns []net.Listener, pod, volumeRoot string, log *slog.Logger) error {
	conf, err := readNginxConf(volumeRoot)
	if err != nil {
		return err
	}
	var cfg *tls.Config
	var handler http.Handler = http.HandlerFunc(nginxWelcomePage)
	if conf == nil || conf.certificate == nil {
		certs, err := newSNICertificates(pod + " nginx CA")
		if err != nil {
			return err
		}
		cfg = &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}, GetCertificate: certs.get}
	} else {
		log.Info("nginx.conf read", "ssl_certificate", conf.certPath, "ssl_verify_client", conf.verifyClient)
		cfg = &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}, Certificates: []tls.Certificate{*conf.certificate}}
		if conf.verifyClient != "off" {
			// nginx asks for a certificate and verifies it itself, answering 400 to a
			// missing or bad one instead of failing the handshake.
			cfg.ClientAuth = tls.RequestClientCert
			handler = conf.verifying(handler)
		}
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		log.Info("listening (TLS)", "addr", ln.Addr().String())
		go func() { errc <- srv.Serve(tls.NewListener(ln, cfg)) }()
	}
	var failed error
	pending := len(lns)
	select {
	case <-ctx.Done():
	case err := <-errc:
		pending--
		failed = fmt.Errorf("serve: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	for range pending {
		<-errc
	}
	log.Info("stopped")
	return failed
}

func nginxWelcomePage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Server", "nginx")
	w.Header().Set("Content-Type", "text/html")
	_, _ = io.WriteString(w, nginxWelcome)
}

// sniCertificates mints, once per server name, a certificate signed by its own CA.
type sniCertificates struct {
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	mu    sync.Mutex
	bySNI map[string]*tls.Certificate
}

func newSNICertificates(caName string) (*sniCertificates, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: caName, Organization: []string{"meshlab nginx persona"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &sniCertificates{ca: ca, caKey: key, bySNI: map[string]*tls.Certificate{}}, nil
}

// get returns the certificate for the client's server name ("localhost" without SNI).
func (s *sniCertificates) get(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.ToLower(hello.ServerName)
	if name == "" {
		name = "localhost"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.bySNI[name]; ok {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name, Organization: []string{"meshlab nginx persona"}},
		DNSNames: []string{name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(90 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca, &key.PublicKey, s.caKey)
	if err != nil {
		return nil, fmt.Errorf("create certificate for %s: %w", name, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der, s.ca.Raw}, PrivateKey: key}
	s.bySNI[name] = c
	return c, nil
}

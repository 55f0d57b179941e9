package demoapp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// nginxConfPath is where nginx reads its configuration, in the container.
const nginxConfPath = "/etc/nginx/nginx.conf"

// nginxConf is what the persona takes from nginx.conf: the TLS directives of its
// (first) server block.
type nginxConf struct {
	certPath     string
	certificate  *tls.Certificate // ssl_certificate + ssl_certificate_key; nil without them
	clientCAs    *x509.CertPool   // ssl_client_certificate
	verifyClient string           // ssl_verify_client: on, optional, optional_no_ca or off (the default)
}

// readNginxConf reads root's /etc/nginx/nginx.conf, and the files its TLS directives
// name below root. It returns nil without error when there is no nginx.conf, and an
// error, as nginx's "[emerg]" at start, when a named file cannot be read or used.
func readNginxConf(root string) (*nginxConf, error) {
	if root == "" {
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(root, nginxConfPath))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("nginx: read %s: %w", nginxConfPath, err)
	}
	d := nginxDirectives(string(b))
	c := &nginxConf{verifyClient: "off"}
	file := func(directive string) ([]byte, error) {
		p := d[directive]
		data, err := os.ReadFile(filepath.Join(root, filepath.Clean("/"+p)))
		if err != nil {
			return nil, fmt.Errorf("nginx: [emerg] %s %q: %w", directive, p, err)
		}
		return data, nil
	}
	if v, ok := d["ssl_verify_client"]; ok {
		switch v {
		case "on", "off", "optional", "optional_no_ca":
			c.verifyClient = v
		default:
			return nil, fmt.Errorf("nginx: [emerg] invalid value %q in \"ssl_verify_client\" directive, it must be \"on\", \"off\", \"optional\" or \"optional_no_ca\"", v)
		}
	}
	if d["ssl_certificate"] != "" {
		certPEM, err := file("ssl_certificate")
		if err != nil {
			return nil, err
		}
		if d["ssl_certificate_key"] == "" {
			return nil, fmt.Errorf("nginx: [emerg] no \"ssl_certificate_key\" is defined for certificate %q", d["ssl_certificate"])
		}
		keyPEM, err := file("ssl_certificate_key")
		if err != nil {
			return nil, err
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("nginx: [emerg] cannot load certificate %q: %w", d["ssl_certificate"], err)
		}
		c.certPath, c.certificate = d["ssl_certificate"], &cert
	}
	if c.verifyClient == "on" || c.verifyClient == "optional" {
		if d["ssl_client_certificate"] == "" {
			return nil, errors.New("nginx: [emerg] no ssl_client_certificate for ssl_verify_client")
		}
		caPEM, err := file("ssl_client_certificate")
		if err != nil {
			return nil, err
		}
		c.clientCAs = x509.NewCertPool()
		if !c.clientCAs.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("nginx: [emerg] ssl_client_certificate %q holds no PEM certificate", d["ssl_client_certificate"])
		}
	}
	return c, nil
}

// nginxDirectives returns the first value of each simple directive ("name value;") of
// an nginx configuration, comments removed; blocks are flattened, so the first server
// block's directives win.
func nginxDirectives(conf string) map[string]string {
	var b strings.Builder
	for _, line := range strings.Split(conf, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line + "\n")
	}
	out := map[string]string{}
	for _, stmt := range strings.FieldsFunc(b.String(), func(r rune) bool { return r == ';' || r == '{' || r == '}' }) {
		f := strings.Fields(stmt)
		if len(f) < 2 {
			continue
		}
		if _, seen := out[f[0]]; !seen {
			out[f[0]] = strings.Trim(f[1], `"'`)
		}
	}
	return out
}

// verifying wraps next with nginx's client certificate check: under "on" a request
// without a certificate, or with one the ssl_client_certificate CA did not sign, gets
// nginx's 400 page; "optional" only refuses a bad one.
func (c *nginxConf) verifying(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var certs []*x509.Certificate
		if r.TLS != nil {
			certs = r.TLS.PeerCertificates
		}
		switch {
		case len(certs) == 0 && c.verifyClient == "on":
			nginxBadRequest(w, "No required SSL certificate was sent")
			return
		case len(certs) > 0 && c.verifyClient != "optional_no_ca":
			inter := x509.NewCertPool()
			for _, ic := range certs[1:] {
				inter.AddCert(ic)
			}
			if _, err := certs[0].Verify(x509.VerifyOptions{
				Roots: c.clientCAs, Intermediates: inter, CurrentTime: time.Now(),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			}); err != nil {
				nginxBadRequest(w, "The SSL certificate error")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// nginxBadRequest writes nginx's 400 page with reason.
func nginxBadRequest(w http.ResponseWriter, reason string) {
	w.Header().Set("Server", "nginx")
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = io.WriteString(w, "<html>\n<head><title>400 "+reason+"</title></head>\n<body>\n<center><h1>400 Bad Request</h1></center>\n<center>"+reason+"</center>\n<hr><center>nginx</center>\n</body>\n</html>\n")
}

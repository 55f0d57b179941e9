package lab

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"slices"
	"sync"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/controlplane/model"
)

// The DNS certificates of meshConfig.certificates (tasks/security/cert-management/
// dns-cert), as istiod's Chiron provisioned them: for each entry, a Secret of type
// istio.io/dns-key-and-cert named secretName in istio-system holding cert-chain.pem,
// key.pem and root-cert.pem, a certificate for the entry's dnsNames; one deleted, or
// naming other DNS names than its entry, is made again. The lab's CA signs them where
// Chiron had the Kubernetes CA sign (a lab has no Kubernetes CA), for dnsCertTTL; a lab
// lives far shorter, so they are not rotated.

// dnsCertTTL is how long a DNS certificate is valid: a year, well past any lab's life.
const dnsCertTTL = 365 * 24 * time.Hour

// Keys of a DNS certificate Secret, Istio's.
const (
	dnsCertChainKey = "cert-chain.pem"
	dnsCertKeyKey   = "key.pem"
	dnsCertRootKey  = "root-cert.pem"
)

// dnsCertController provisions the Secrets. Its reconcile runs after every apply and
// delete, in the background (it applies the Secrets itself), one at a time.
type dnsCertController struct {
	mu sync.Mutex
	wg sync.WaitGroup
}

// kick reconciles the DNS certificates of l's mesh config in the background.
func (d *dnsCertController) kick(l *Lab) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.reconcile(l)
	}()
}

// reconcile makes the Secret of every meshConfig.certificates entry that has none, or
// one naming other DNS names; failures are logged and published.
func (d *dnsCertController) reconcile(l *Lab) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l.ca == nil {
		return
	}
	l.mu.Lock()
	m, sc, ctx := l.model, l.scenario, l.serverCtx
	l.mu.Unlock()
	if m == nil || sc == nil || ctx == nil || len(m.Mesh.DNSCertificates) == 0 {
		return
	}
	ns := caCertsNamespace // istiod's namespace, where Chiron wrote them
	var files []api.ConfigFile
	for _, c := range m.Mesh.DNSCertificates {
		if dnsCertCurrent(sc, ns, c) {
			continue
		}
		cert, err := l.ca.Authority().SignDNS(c.DNSNames, dnsCertTTL)
		if err != nil {
			l.log.Error("DNS certificate not made", "secret", ns+"/"+c.SecretName, "err", err)
			continue
		}
		obj := map[string]any{
			"apiVersion": "v1", "kind": "Secret", "type": string(config.IstioDNSSecretType),
			"metadata": map[string]any{"name": c.SecretName, "namespace": ns},
			"data":     map[string][]byte{dnsCertChainKey: cert.ChainPEM, dnsCertKeyKey: cert.KeyPEM, dnsCertRootKey: cert.RootPEM},
		}
		js, err := json.Marshal(obj)
		if err != nil {
			continue
		}
		files = append(files, api.ConfigFile{Name: "<istiod DNS certificate " + c.SecretName + ">", Data: string(js), Namespace: ns})
	}
	if len(files) == 0 {
		return
	}
	if _, err := l.Apply(ctx, files); err != nil {
		l.log.Error("DNS certificates not stored", "err", err)
		l.publish("ca.dns-cert-failed", "", "DNS certificates not stored: "+err.Error(), map[string]any{"error": err.Error()})
		return
	}
	for _, f := range files {
		l.log.Info("DNS certificate provisioned", "secret", f.Name)
	}
}

// dnsCertCurrent reports whether the scenario holds c's Secret in ns, of Istio's DNS
// certificate type, whose certificate names c's DNS names.
func dnsCertCurrent(sc *config.Scenario, ns string, c model.DNSCertificate) bool {
	objs, err := sc.Find("Secret", c.SecretName)
	if err != nil {
		return false
	}
	for _, o := range objs {
		if o.Origin.Namespace != ns || o.Secret == nil || o.Secret.Type != config.IstioDNSSecretType {
			continue
		}
		b, _ := pem.Decode(bytes.TrimSpace(o.Secret.Data[dnsCertChainKey]))
		if b == nil {
			return false
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		return err == nil && slices.Equal(cert.DNSNames, c.DNSNames)
	}
	return false
}

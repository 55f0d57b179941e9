package proxyconfig

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// secretItem is one row of the secrets table (istioctl's sdscompare.SecretItem).
type secretItem struct {
	name, state string
	valid       bool
	serial      string
	notAfter    string
	notBefore   string
	typ         string
	trustDomain string
}

// Secrets prints the proxy's SDS secrets: as JSON/YAML the secrets section, as a table
// each warming then active secret with its certificate's type, validity (judged by
// w.Now), serial number and dates.
func (w Writer) Secrets(d *ConfigDump, format Format) error {
	dump, ok, err := section(d, &adminv3.SecretsConfigDump{})
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("sidecar doesn't support secrets: %w", errNoSection(dump))
	}
	if format != Short {
		b, err := marshalOne(dump, format)
		if err != nil {
			return err
		}
		return w.println(b)
	}
	return w.secretSummary(dump)
}

func (w Writer) secretSummary(dump *adminv3.SecretsConfigDump) error {
	if len(dump.GetDynamicActiveSecrets()) == 0 && len(dump.GetDynamicWarmingSecrets()) == 0 {
		_, err := fmt.Fprintln(w.Out, "No active or warming secrets found.")
		return err
	}
	var items []secretItem
	for _, s := range dump.GetDynamicWarmingSecrets() {
		it, err := w.secretItems(s, "WARMING")
		if err != nil {
			return fmt.Errorf("failed building warming secret %s: %w", s.GetName(), err)
		}
		items = append(items, it...)
	}
	for _, s := range dump.GetDynamicActiveSecrets() {
		it, err := w.secretItems(s, "ACTIVE")
		if err != nil {
			return fmt.Errorf("failed building active secret %s: %w", s.GetName(), err)
		}
		items = append(items, it...)
	}
	if len(items) == 0 {
		_, err := fmt.Fprintln(w.Out, "No secret items to show.")
		return err
	}
	// istioctl adds TRUST DOMAIN only when every item knows its trust domain (trust
	// domain federation); a root CA's certificate does not name one.
	allKnown := true
	for _, it := range items {
		if it.trustDomain == "" {
			allKnown = false
			break
		}
	}
	columns := []string{"RESOURCE NAME", "TYPE", "STATUS", "VALID CERT", "SERIAL NUMBER", "NOT AFTER", "NOT BEFORE"}
	if allKnown {
		columns = append(columns, "TRUST DOMAIN")
	}
	tw := new(tabwriter.Writer).Init(w.Out, 0, 5, 5, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for _, s := range items {
		name := s.name
		if w.withType {
			name = "secret/" + name
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%s\t%s", name, s.typ, s.state, s.valid, s.serial, s.notAfter, s.notBefore)
		if allKnown {
			fmt.Fprintf(tw, "\t%s", s.trustDomain)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// secretItems reads one dynamic secret: its certificate chain, else its trusted CA,
// else one item per trust domain of a SPIFFE validator.
func (w Writer) secretItems(s *adminv3.SecretsConfigDump_DynamicSecret, state string) ([]secretItem, error) {
	sec, err := unpack(s.GetSecret(), &tlsv3.Secret{})
	if err != nil {
		return nil, err
	}
	base := secretItem{name: s.GetName(), state: state}
	if chain := sec.GetTlsCertificate().GetCertificateChain().GetInlineBytes(); len(chain) > 0 {
		return []secretItem{w.withCert(base, chain)}, nil
	}
	if ca := sec.GetValidationContext().GetTrustedCa().GetInlineBytes(); len(ca) > 0 {
		return []secretItem{w.withCert(base, ca)}, nil
	}
	if cv := sec.GetValidationContext().GetCustomValidatorConfig(); cv != nil &&
		cv.GetTypedConfig().GetTypeUrl() == "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.SPIFFECertValidatorConfig" {
		spiffe, err := unpack(cv.GetTypedConfig(), &tlsv3.SPIFFECertValidatorConfig{})
		if err != nil {
			return nil, fmt.Errorf("error unmarshaling spiffe config: %w", err)
		}
		var out []secretItem
		for _, td := range spiffe.GetTrustDomains() {
			it := base
			it.trustDomain = td.GetName()
			if b := td.GetTrustBundle().GetInlineBytes(); len(b) > 0 {
				it = w.withCert(it, b)
			}
			out = append(out, it)
		}
		return out, nil
	}
	return []secretItem{base}, nil
}

// withCert fills it from the first PEM certificate of pemBytes; an unreadable one leaves
// it invalid with empty fields, as istioctl does.
func (w Writer) withCert(it secretItem, pemBytes []byte) secretItem {
	cert, err := firstCert(pemBytes)
	if err != nil {
		return it
	}
	it.typ = "Cert Chain"
	if cert.IsCA {
		it.typ = "CA"
	}
	if it.trustDomain == "" {
		for _, u := range cert.URIs {
			if u.Scheme == "spiffe" {
				it.trustDomain = u.Host
			}
		}
	}
	now := w.now()
	it.serial = fmt.Sprintf("%032x", cert.SerialNumber)
	it.notAfter = cert.NotAfter.Format(time.RFC3339)
	it.notBefore = cert.NotBefore.Format(time.RFC3339)
	it.valid = now.After(cert.NotBefore) && now.Before(cert.NotAfter)
	return it
}

func firstCert(pemBytes []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("failed to parse certificate PEM")
	}
	return x509.ParseCertificate(block.Bytes)
}

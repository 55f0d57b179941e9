package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestSDSFileSecretsFromVolumes: a Sidecar ingress tls's "file-cert:<crt>~<key>" and
// "file-root:<ca>" are read from the proxy container's volume files (below the volume
// root, at their container paths), as pilot-agent reads its mounts; a missing or
// malformed file gives no secret (the proxy waits), a name without ~ none either.
func TestSDSFileSecretsFromVolumes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	cert, key, ca := "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n", "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
	for p, data := range map[string]string{"etc/istio/tls-certs/tls.crt": cert, "etc/istio/tls-certs/tls.key": key, "etc/istio/tls-ca-certs/ca.crt": ca, "etc/istio/tls-certs/bad.key": "not a key"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := &sdsServer{volumeRoot: root, log: testutil.Logger(t)}
	name := SecretFileCertPrefix + "/etc/istio/tls-certs/tls.crt~/etc/istio/tls-certs/tls.key"
	sec := s.fileCert(name, strings.TrimPrefix(name, SecretFileCertPrefix))
	if got := sec.GetTlsCertificate(); sec.GetName() != name || string(got.GetCertificateChain().GetInlineBytes()) != cert || string(got.GetPrivateKey().GetInlineBytes()) != key {
		t.Errorf("file-cert secret = %v, want the volume's certificate and key", sec)
	}
	if sec := s.fileRoot(SecretFileRootPrefix+"/etc/istio/tls-ca-certs/ca.crt", "/etc/istio/tls-ca-certs/ca.crt"); string(sec.GetValidationContext().GetTrustedCa().GetInlineBytes()) != ca {
		t.Errorf("file-root secret = %v, want the volume's CA", sec)
	}
	for _, paths := range []string{
		"/etc/istio/tls-certs/tls.crt~/etc/istio/tls-certs/bad.key", // not a key
		"/etc/istio/tls-certs/missing.crt~/etc/istio/tls-certs/tls.key",
		"/etc/istio/tls-certs/tls.crt", // no ~
	} {
		if sec := s.fileCert(SecretFileCertPrefix+paths, paths); sec != nil {
			t.Errorf("file-cert:%s = %v, want none", paths, sec)
		}
	}
}

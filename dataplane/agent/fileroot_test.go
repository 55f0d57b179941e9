package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// file-root secrets, as a DestinationRule's SIMPLE TLS names them: "system" is the pod's
// system bundle (the lab's file when given), a path is that file; a file without a
// certificate, or none at all, gives no secret, so the proxy waits as for a late one.
func TestSDSFileRootSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pem := "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	bundle, other, junk := filepath.Join(dir, "bundle.pem"), filepath.Join(dir, "ca.pem"), filepath.Join(dir, "junk")
	for p, s := range map[string]string{bundle: pem, other: pem + pem, junk: "not a certificate"} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &sdsServer{systemCA: bundle, log: testutil.Logger(t)}
	for _, tc := range []struct {
		path string
		want string // "" = no secret
	}{
		{"system", pem},
		{other, pem + pem},
		{junk, ""},
		{filepath.Join(dir, "missing.pem"), ""},
	} {
		sec := s.fileRoot(SecretFileRootPrefix+tc.path, tc.path)
		switch {
		case tc.want == "" && sec != nil:
			t.Errorf("file-root:%s = %v, want no secret", tc.path, sec)
		case tc.want != "" && sec == nil:
			t.Errorf("file-root:%s: no secret, want the file's certificates", tc.path)
		case tc.want != "":
			if sec.GetName() != SecretFileRootPrefix+tc.path || string(sec.GetValidationContext().GetTrustedCa().GetInlineBytes()) != tc.want {
				t.Errorf("file-root:%s = %v, want a validation context with the file's certificates", tc.path, sec)
			}
		}
	}
}

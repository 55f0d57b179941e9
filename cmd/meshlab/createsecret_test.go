package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --from-file takes a file (its base name as the key, or key=path) or a directory, and
// --from-literal key=value; a key given twice is refused in kubectl's words.
func TestCreateSecretData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{"tls.crt": "C", "tls.key": "K", "ca.crt": "A"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	data, err := secretData([]string{"tls.key=" + filepath.Join(dir, "tls.key"), filepath.Join(dir, "tls.crt"), "ca.crt=" + filepath.Join(dir, "ca.crt")}, []string{"user=admin"})
	if err != nil {
		t.Fatal(err)
	}
	if string(data["tls.key"]) != "K" || string(data["tls.crt"]) != "C" || string(data["ca.crt"]) != "A" || string(data["user"]) != "admin" {
		t.Fatalf("data %q", data)
	}
	if data, err := secretData([]string{dir}, nil); err != nil || len(data) != 3 {
		t.Fatalf("a directory: %q %v, want its three files", data, err)
	}
	if _, err := secretData([]string{filepath.Join(dir, "tls.crt")}, []string{"tls.crt=x"}); err == nil || !strings.Contains(err.Error(), "cannot add key tls.crt") {
		t.Fatalf("a key twice: %v", err)
	}
}

// The Secure Gateways task writes -n before the verb's words:
// `kubectl create -n istio-system secret tls httpbin-credential --key=... --cert=...`.
func TestCreateSecretParsesAsTheDocsWriteIt(t *testing.T) {
	t.Parallel()
	root := newRootCmd()
	cmd, rest, err := root.Find([]string{"create", "-n", "istio-system", "secret", "tls", "httpbin-credential", "--key=a.key", "--cert=a.crt"})
	if err != nil || cmd.Name() != "tls" {
		t.Fatalf("Find = %v %v %v, want create secret tls", cmd.Name(), rest, err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatal(err)
	}
	if ns, _ := cmd.Flags().GetString("namespace"); ns != "istio-system" {
		t.Fatalf("namespace %q", ns)
	}
	if c, _ := cmd.Flags().GetString("cert"); c != "a.crt" {
		t.Fatalf("cert %q", c)
	}
}

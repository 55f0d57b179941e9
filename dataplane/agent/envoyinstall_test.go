package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakeEnvoyArchive is a func-e tarball: <base>/bin/envoy, a script that prints a version.
func fakeEnvoyArchive(t *testing.T, base, version string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	script := "#!/bin/sh\necho \"envoy  version: fake/" + version + "/Clean/RELEASE/BoringSSL\"\n"
	for _, h := range []*tar.Header{
		{Name: base + "/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: base + "/bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: base + "/bin/envoy", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(script))},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tw.Write([]byte(script)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestInstallEnvoyFromLocalManifest points func-e at a versions manifest and an archive
// served by the test: no internet.
func TestInstallEnvoyFromLocalManifest(t *testing.T) {
	const version = "1.36.2"
	tarball := "envoy-" + version + "-" + runtime.GOOS + "-" + runtime.GOARCH + ".tar.gz"
	archive := fakeEnvoyArchive(t, strings.TrimSuffix(tarball, ".tar.gz"), version)
	sum := sha256.Sum256(archive)
	var requests []string
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("/envoy-versions.json", func(w http.ResponseWriter, r *http.Request) {
		requests = append(requests, r.URL.Path)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"latestVersion": version,
			"versions": map[string]any{version: map[string]any{
				"releaseDate": "2026-01-15",
				"tarballs":    map[string]string{runtime.GOOS + "/" + runtime.GOARCH: srv.URL + "/" + tarball},
			}},
			"sha256sums": map[string]string{tarball: hex.EncodeToString(sum[:])},
		})
	})
	mux.HandleFunc("/"+tarball, func(w http.ResponseWriter, r *http.Request) {
		requests = append(requests, r.URL.Path)
		_, _ = w.Write(archive)
	})
	home := t.TempDir()
	var out bytes.Buffer
	path, err := InstallEnvoy(context.Background(), InstallOptions{
		Version: version, VersionsURL: srv.URL + "/envoy-versions.json", Home: home, Out: &out,
	})
	srv.CloseClientConnections()
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out.String())
	}
	if want := filepath.Join(home, "versions", version, "bin", "envoy"); path != want {
		t.Errorf("installed at %s, want %s", path, want)
	}
	if len(requests) != 2 {
		t.Errorf("requests %q, want the manifest and the archive", requests)
	}
	v, err := exec.Command(path, "--version").Output()
	if err != nil || !strings.Contains(string(v), "fake/"+version) {
		t.Errorf("installed envoy --version = %q, %v", v, err)
	}
	// The agent's discovery finds what was installed.
	l := lookup{
		getenv:     func(k string) string { return map[string]string{FuncEHomeEnv: home}[k] },
		lookPath:   func(string) (string, error) { return "", os.ErrNotExist },
		executable: os.Executable, readDir: os.ReadDir, isExec: isExecutable,
	}
	if b, err := resolveProxy(Config{}, l); err != nil || b.Path != path {
		t.Errorf("resolveProxy = %+v %v, want %s", b, err, path)
	}

	// An unknown version is a clear error.
	_, err = InstallEnvoy(context.Background(), InstallOptions{Version: "9.9.9", VersionsURL: srv.URL + "/envoy-versions.json", Home: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "9.9.9") {
		t.Errorf("unknown version: err = %v", err)
	}
	srv.CloseClientConnections()
}

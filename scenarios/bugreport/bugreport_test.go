package bugreport

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/config"
)

// fixture is a bug report written by hand in istioctl's layout: a shop whose
// DestinationRule allows httpbin one connection and one pending request.
const fixture = "testdata/bug-report"

// archiveOf writes dir as istioctl does (a gzipped tar of the report's parent, so every
// entry is under bug-report/) and returns its path.
func archiveOf(tb testing.TB, dir string) string {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "bug-report.tar.gz")
	if err := os.WriteFile(out, tarGz(tb, dir), 0o644); err != nil {
		tb.Fatal(err)
	}
	return out
}

// tarGz returns dir's files as a .tar.gz whose entries are under dir's base name.
func tarGz(tb testing.TB, dir string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	base := filepath.Base(dir)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if err := tw.WriteHeader(&tar.Header{Name: base + "/" + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadFixture(t *testing.T) {
	for _, src := range []string{fixture, archiveOf(t, fixture)} {
		t.Run(filepath.Base(src), func(t *testing.T) {
			r, err := Read(src)
			if err != nil {
				t.Fatal(err)
			}
			if r.IstioVersion != "1.28.0" || r.VersionFrom != "versions" {
				t.Errorf("Istio version %q from %q; want 1.28.0 from versions", r.IstioVersion, r.VersionFrom)
			}
			if want := netip.MustParsePrefix("10.96.0.0/16"); r.ServiceCIDR != want {
				t.Errorf("service range %s; want %s", r.ServiceCIDR, want)
			}
			if want := []string{"shop/fortio-deploy-5c4f8b6d9-k8m2p", "shop/httpbin-7d6b9c8f5-x2x9q"}; !slices.Equal(r.Proxies, want) {
				t.Errorf("proxies %v; want %v", r.Proxies, want)
			}
			notes := strings.Join(r.Notes, "\n")
			for _, want := range []string{
				"bug-report: cluster/k8s-resources: read",
				"bug-report: cluster/crs: read",
				"bug-report: cluster/secrets: kubectl's table",
				"data.mesh.enablePrometheusMerge ignored",
				"data.mesh.defaultConfig.discoveryAddress ignored",
				"bug-report: cluster/k8s-resources: ConfigMap istio-system/istio: the mesh config",
			} {
				if !strings.Contains(notes, want) {
					t.Errorf("notes lack %q:\n%s", want, notes)
				}
			}
			sc, err := config.Load(src, r.Scenario)
			if err != nil {
				t.Fatalf("load: %v", r.Locate(err))
			}
			m, err := sc.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: r.ServiceCIDR})
			if err != nil {
				t.Fatalf("build: %v", r.Locate(err))
			}
			var pods []string
			for _, p := range m.Pods {
				pods = append(pods, p.Namespace+"/"+p.Workload)
			}
			if want := []string{"shop/fortio-deploy", "shop/httpbin"}; !slices.Equal(pods, want) {
				t.Errorf("pods' workloads %v; want %v", pods, want)
			}
			vips := map[string]string{}
			for _, s := range m.Services {
				vips[s.Namespace+"/"+s.Name] = s.VIP.String()
			}
			if vips["shop/httpbin"] != "10.96.45.7" || vips["shop/fortio"] != "10.96.201.3" {
				t.Errorf("VIPs %v; want the cluster's (httpbin 10.96.45.7, fortio 10.96.201.3)", vips)
			}
			if m.Mesh.AccessLogPath() != "/dev/stdout" {
				t.Errorf("access log %q; want the ConfigMap's /dev/stdout", m.Mesh.AccessLogPath())
			}
			var skipped []string
			for _, c := range sc.Skipped {
				skipped = append(skipped, c.Ref.Kind+" "+c.Ref.Namespace+"/"+c.Ref.Name)
			}
			for _, want := range []string{"ConfigMap istio-system/istio", "Deployment istio-system/istiod", "Node default/kind-shop-control-plane", "Pod shop/httpbin-7d6b9c8f5-x2x9q"} {
				if !slices.Contains(skipped, want) {
					t.Errorf("skipped %v lack %s", skipped, want)
				}
			}
		})
	}
}

// copyFixture copies the fixture to a new directory, where edit may change a file.
func copyFixture(t *testing.T, edit func(dir string)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bug-report")
	if err := os.CopyFS(dir, os.DirFS(fixture)); err != nil {
		t.Fatal(err)
	}
	edit(dir)
	return dir
}

func replaceIn(t *testing.T, file, old, new string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s does not hold %q", file, old)
	}
	if err := os.WriteFile(file, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRefusedByName: what a lab cannot honour is refused naming the report's file, the
// object and the field.
func TestRefusedByName(t *testing.T) {
	cases := []struct {
		name string
		edit func(dir string)
		want string
	}{
		{"mesh field with behaviour", func(dir string) {
			replaceIn(t, filepath.Join(dir, "cluster/k8s-resources"), "      enablePrometheusMerge: true\n", "      enablePrometheusMerge: true\n      enableAutoMtls: false\n")
		}, "cluster/k8s-resources: ConfigMap istio-system/istio: data.mesh.enableAutoMtls: is not supported by meshlab"},
		{"custom resource", func(dir string) {
			replaceIn(t, filepath.Join(dir, "cluster/crs"), "    trafficPolicy:\n", "    trafficPolicy:\n      tunnel: {protocol: CONNECT, targetHost: x, targetPort: 8080}\n")
		}, "cluster/crs: document 1 items[0]: DestinationRule shop/httpbin: spec.trafficPolicy.tunnel"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyFixture(t, c.edit)
			r, err := Read(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, err = config.Load(dir, r.Scenario)
			if err == nil {
				t.Fatal("loaded; want it refused")
			}
			if msg := r.Locate(err).Error(); !strings.Contains(msg, dir+": "+c.want) {
				t.Errorf("error:\n%s\nwant it to name %q", msg, dir+": "+c.want)
			}
		})
	}
}

func TestNotABugReport(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "k8s-resources"), []byte("kind: List\nitems: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "x.tar.gz")
	if err := os.WriteFile(garbage, []byte{0x1f, 0x8b, 1, 2, 3}, 0o644); err != nil {
		t.Fatal(err)
	}
	two := t.TempDir()
	for _, d := range []string{"a", "b"} {
		if err := os.CopyFS(filepath.Join(two, d), os.DirFS(fixture)); err != nil {
			t.Fatal(err)
		}
	}
	for src, want := range map[string]string{
		dir:                        "no cluster/k8s-resources in it",
		garbage:                    "gzip",
		filepath.Join(dir, "none"): "no such file",
		two:                        "it holds 2 bug reports (a/, b/)",
	} {
		_, err := Read(src)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--from-bug-report "+src) {
			t.Errorf("Read(%s): %v; want an error naming it and %q", src, err, want)
		}
	}
}

// TestLocateKeepsOtherErrors: Locate leaves errors not about the report alone.
func TestLocateKeepsOtherErrors(t *testing.T) {
	r := &Report{Source: "x"}
	e := errors.New("plain")
	if got := r.Locate(e); !errors.Is(got, e) || got.Error() != "plain" {
		t.Error("Locate changed a plain error")
	}
}

// FuzzReadTar: the archive reader takes any bytes without panicking, and what it keeps
// is under the limits.
func FuzzReadTar(f *testing.F) {
	f.Add(tarGz(f, fixture))
	var plain bytes.Buffer
	tw := tar.NewWriter(&plain)
	for _, n := range []string{"bug-report/cluster/k8s-resources", "../../etc/cluster/k8s-resources", "/abs/cluster/crs", "bug-report/istio/ns/pod/debug/mesh"} {
		_ = tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: 11, Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte("kind: List\n"))
	}
	_ = tw.Close()
	f.Add(plain.Bytes())
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := readTar(bytes.NewReader(data))
		if err != nil {
			return
		}
		fs, err := collect(entries)
		if err != nil {
			return
		}
		for name, d := range fs.data {
			if !wanted(name) || len(d) > config.MaxFileBytes {
				t.Errorf("kept %q (%d bytes)", name, len(d))
			}
			if strings.Contains(name, "..") {
				t.Errorf("kept a climbing name %q", name)
			}
		}
	})
}

package lab

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// A pod's volume files are written below its root at their container paths, owned by
// the app's uid and readable by it only; a path with ".." stays below the root; a
// second write starts afresh.
func TestWriteVolumeFiles(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	root := filepath.Join(t.TempDir(), "volumes")
	const uid = 0x70010123
	files := []model.File{
		{Path: "/etc/nginx/nginx.conf", Data: []byte("events {}")},
		{Path: "/etc/nginx-server-certs/tls.crt", Data: []byte("CERT")},
		{Path: "/../../escape", Data: []byte("x")},
	}
	if err := writeVolumeFiles(root, files, uid); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"etc/nginx/nginx.conf": "events {}", "etc/nginx-server-certs/tls.crt": "CERT", "escape": "x"} {
		p := filepath.Join(root, path)
		b, err := os.ReadFile(p)
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", path, b, err, want)
			continue
		}
		fi, _ := os.Stat(p)
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != uid || fi.Mode().Perm() != 0o400 {
			t.Errorf("%s: uid %d mode %v, want %d 0400", path, st.Uid, fi.Mode().Perm(), uid)
		}
	}
	for _, d := range []string{"", "etc", "etc/nginx"} {
		fi, err := os.Stat(filepath.Join(root, d))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || fi.Mode().Perm() != 0o500 {
			t.Errorf("directory %q: uid %d mode %v, want %d 0500", d, st.Uid, fi.Mode().Perm(), uid)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(root)), "escape")); err == nil {
		t.Error("a path with .. was written outside the root")
	}
	if err := writeVolumeFiles(root, files[:1], uid); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/nginx-server-certs/tls.crt")); err == nil {
		t.Error("a file of the previous write is still there")
	}
}

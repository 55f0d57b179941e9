package lab

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A pod's run directory keeps its sockets within Linux's 108-byte sun_path whatever the
// pod's key: a long key (Istio's tcp-echo in istio-io-tcp-traffic-shifting) is cut with a
// hash, and two long keys that share a prefix stay apart.
func TestPodDirFitsSocketPaths(t *testing.T) {
	t.Parallel()
	p := PathsFor("/run/meshlab", strings.Repeat("l", 20))
	short := "details-v1-7d8f6c9b5-x2x4k"
	if got := p.PodDir(short); got != filepath.Join(p.Dir, "pods", short) {
		t.Errorf("PodDir(%q) = %q, want the key itself", short, got)
	}
	a := "tcp-echo-v1-6b5cf8c4b7-q9z2x.istio-io-tcp-traffic-shifting"
	b := "tcp-echo-v2-6b5cf8c4b7-q9z2x.istio-io-tcp-traffic-shifting"
	long := strings.Repeat("p", 40) + "." + strings.Repeat("n", 63)
	seen := map[string]string{}
	for _, key := range []string{a, b, long} {
		sock := p.AgentSocket(key)
		if len(sock) >= 108 {
			t.Errorf("AgentSocket(%q) = %q, %d bytes: over sun_path's 108", key, sock, len(sock))
		}
		dir := filepath.Base(p.PodDir(key))
		if other, ok := seen[dir]; ok {
			t.Errorf("keys %q and %q share the directory %q", other, key, dir)
		}
		seen[dir] = key
		if again := filepath.Base(p.PodDir(key)); again != dir {
			t.Errorf("PodDir(%q) is not stable", key)
		}
	}
}

// TestWriteRecordConcurrently holds what the istiod trust domain test hit: an apply's new
// pods writing the record (their app uids) while istiod's restart wrote it (its pid). With
// one shared temporary name, one writer's rename found the other's file gone and the pods
// failed with "rename lab.json.tmp lab.json: no such file or directory".
func TestWriteRecordConcurrently(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lab.json")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- writeRecord(path, &Record{Name: "demo", PID: i + 1})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent writeRecord: %v", err)
		}
	}
	r, err := ReadRecord(Paths{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "demo" || r.PID < 1 || r.PID > 64 {
		t.Errorf("record after 64 writes: name %q pid %d, want demo and one writer's pid", r.Name, r.PID)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

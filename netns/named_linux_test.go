package netns

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
	"golang.org/x/sys/unix"
)

func uniqueName(t *testing.T) string {
	t.Helper()
	return testutil.UniqueName(t)
}

func TestCreateListDelete(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	prefix := testNames(t)
	a, b := prefix+"a", prefix+"b"

	if Exists(a) {
		t.Fatalf("Exists(%q) before Create", a)
	}
	for _, n := range []string{b, a} {
		if err := Create(n); err != nil {
			t.Fatalf("Create(%q): %v", n, err)
		}
	}
	if err := Create(a); !errors.Is(err, ErrExists) {
		t.Fatalf("second Create(%q) = %v, want ErrExists", a, err)
	}
	if !Exists(a) || !Exists(b) {
		t.Fatalf("Exists after Create: a=%v b=%v", Exists(a), Exists(b))
	}
	got, err := List(prefix)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if want := []string{a, b}; !slices.Equal(got, want) {
		t.Fatalf("List(%q) = %v, want %v", prefix, got, want)
	}

	// The namespace is a new one, not the caller's.
	var root, inA unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &root); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(Path(a), &inA); err != nil {
		t.Fatal(err)
	}
	if root.Ino == inA.Ino {
		t.Fatal("Create bound the caller's own namespace")
	}

	if err := Delete(a); err != nil {
		t.Fatalf("Delete(%q): %v", a, err)
	}
	if Exists(a) {
		t.Fatalf("Exists(%q) after Delete", a)
	}
	if _, err := os.Stat(Path(a)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("bind mount file still there after Delete: %v", err)
	}
	if err := Delete(a); err != nil {
		t.Fatalf("Delete of an absent namespace = %v, want nil", err)
	}
	if got, _ := List(prefix); !slices.Equal(got, []string{b}) {
		t.Fatalf("List after Delete = %v, want [%s]", got, b)
	}
}

func TestDoEntersAndRestores(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	name := testNames(t) + "do"
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	var want unix.Stat_t
	if err := unix.Stat(Path(name), &want); err != nil {
		t.Fatal(err)
	}
	var inside unix.Stat_t
	err := Do(name, func() error { return unix.Stat(threadNSPath(), &inside) })
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if inside.Ino != want.Ino {
		t.Fatalf("thread in Do is in netns inode %d, want %d", inside.Ino, want.Ino)
	}
	// The fn error comes back unchanged, and a panic is re-raised in the caller.
	sentinel := errors.New("sentinel")
	if err := Do(name, func() error { return sentinel }); !errors.Is(err, sentinel) {
		t.Fatalf("Do returned %v, want the fn error", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want boom", r)
			}
		}()
		_ = Do(name, func() error { panic("boom") })
	}()
	if err := Do(prefixMissing(name), func() error { return nil }); err == nil {
		t.Fatal("Do in a missing namespace succeeded")
	}
}

func prefixMissing(name string) string { return name + "-missing" }

func TestInvalidNames(t *testing.T) {
	for _, n := range []string{"", ".", "..", "a/b", "../etc"} {
		if err := Create(n); err == nil {
			t.Errorf("Create(%q) succeeded", n)
		}
		if err := Delete(n); err == nil {
			t.Errorf("Delete(%q) succeeded", n)
		}
		if Exists(n) {
			t.Errorf("Exists(%q) = true", n)
		}
	}
}

// TestIPNetnsBesideOurs adds and deletes a namespace with iproute2 beside one of ours:
// our namespace must still delete cleanly (iproute2 self-binds /run/netns when it is no
// mount point, which, done on top of our mounts, made Delete fail with EBUSY).
func TestIPNetnsBesideOurs(t *testing.T) {
	testutil.RequireRoot(t)
	ipPath, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("iproute2's ip is not installed")
	}
	prefix := testNames(t)
	ours, theirs := prefix+"ours", prefix+"ip"
	if err := Create(ours); err != nil {
		t.Fatalf("Create(%q): %v", ours, err)
	}
	mounted, err := IsRunDirMounted()
	if err != nil {
		t.Fatal(err)
	}
	if !mounted {
		// Only when /run/netns held namespaces before this process made its first one.
		t.Skipf("%s is no mount point and held other namespaces before this test: `ip netns add` would stack on them", RunDir)
	}
	for _, args := range [][]string{{"netns", "add", theirs}, {"netns", "list"}, {"netns", "delete", theirs}} {
		if out, err := exec.Command(ipPath, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	if err := Delete(ours); err != nil {
		t.Fatalf("Delete(%q) after ip netns add/delete beside it: %v", ours, err)
	}
	if _, err := os.Stat(Path(ours)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still present after Delete: %v", Path(ours), err)
	}
}

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		"/run/netns":          "/run/netns",
		`/run/my\040dir`:      "/run/my dir",
		`/a\134b`:             `/a\b`,
		`/trailing\04`:        `/trailing\04`,
		`/not\999octal/netns`: `/not\999octal/netns`,
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

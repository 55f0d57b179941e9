package netns

import (
	"errors"
	"os"
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

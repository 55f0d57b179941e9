package rqtotals

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTotalsAreSharedThroughTheFile: what a mapping adds, another mapping of the file
// (a hot restart child) and Read (the lab) see; Create keeps an existing file; Zero
// zeroes it.
func TestTotalsAreSharedThroughTheFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), File)
	if err := Create(path, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	parent, err := Map(path)
	if err != nil {
		t.Fatal(err)
	}
	parent.Out().Add(3)
	parent.In().Add(1)
	if err := Create(path, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	child, err := Map(path)
	if err != nil {
		t.Fatal(err)
	}
	child.Out().Add(2)
	if out, in, err := Read(path); err != nil || out != 5 || in != 1 {
		t.Fatalf("Read = %d, %d, %v; want 5, 1", out, in, err)
	}
	child.Zero()
	if out, in, err := Read(path); err != nil || out != 0 || in != 0 {
		t.Fatalf("after Zero, Read = %d, %d, %v; want 0, 0", out, in, err)
	}
	var none *Totals
	none.Zero()
	if none.Out() != nil || none.In() != nil {
		t.Fatal("a nil *Totals has counters")
	}
	if _, _, err := Read(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("Read of a missing file: no error")
	}
}

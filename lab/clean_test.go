package lab

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// writeTestLab makes a run directory with a lab.json under root: alive says whether its
// PID is this (running) test process or a pid that cannot be running; creator nil writes
// a record without CreatorUID, as old labs have.
func writeTestLab(t *testing.T, root, name string, alive bool, creator *uint32) {
	t.Helper()
	p := PathsFor(root, name)
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Record{Name: name, PID: 1 << 30, PIDStart: 1}
	if alive {
		start, err := processStart(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		r.PID, r.PIDStart = os.Getpid(), start
	}
	if err := writeRecord(p.Record(), r); err != nil {
		t.Fatal(err)
	}
	if creator == nil {
		// writeRecord fills CreatorUID: write the old form by hand.
		b, err := os.ReadFile(p.Record())
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "creatorUID") {
				kept = append(kept, line)
			}
		}
		if err := os.WriteFile(p.Record(), []byte(strings.Join(kept, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := ReadRecord(p)
	if err != nil {
		t.Fatal(err)
	}
	got.CreatorUID = creator
	if err := writeRecord(p.Record(), got); err != nil {
		t.Fatal(err)
	}
}

func uidp(u uint32) *uint32 { return &u }

func TestWriteRecordRecordsCreator(t *testing.T) {
	t.Setenv("SUDO_UID", "4242")
	root := t.TempDir()
	p := PathsFor(root, "a")
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeRecord(p.Record(), &Record{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	r, err := ReadRecord(p)
	if err != nil {
		t.Fatal(err)
	}
	want := uint32(os.Getuid())
	if want == 0 {
		want = 4242 // root through sudo: the user who ran sudo
	}
	if r.CreatorUID == nil || *r.CreatorUID != want {
		t.Fatalf("CreatorUID = %v, want %d", r.CreatorUID, want)
	}
	// A later write keeps the creator even when run by someone else.
	t.Setenv("SUDO_UID", "7")
	if err := writeRecord(p.Record(), r); err != nil {
		t.Fatal(err)
	}
	if r2, _ := ReadRecord(p); r2.CreatorUID == nil || *r2.CreatorUID != want {
		t.Fatalf("CreatorUID after rewrite = %v, want %d", r2.CreatorUID, want)
	}
}

func TestCheckClean(t *testing.T) {
	root := t.TempDir()
	writeTestLab(t, root, "live", true, uidp(1000))
	writeTestLab(t, root, "crashed", false, uidp(1000))

	if err := CheckClean(root, "crashed", false); err != nil {
		t.Errorf("crashed lab: %v, want nil", err)
	}
	err := CheckClean(root, "live", false)
	if !errors.Is(err, ErrLabRunning) || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), "meshlab down --name live") {
		t.Errorf("live lab without --force: %v, want ErrLabRunning naming down and --force", err)
	}
	if err := CheckClean(root, "live", true); err != nil {
		t.Errorf("live lab with --force: %v, want nil", err)
	}
	err = CheckClean(root, "zz-never-was", false)
	var nl *NoSuchLabError
	if !errors.As(err, &nl) || !errors.Is(err, ErrNoLab) {
		t.Fatalf("unknown lab: %v, want a *NoSuchLabError wrapping ErrNoLab", err)
	}
	if want := []string{"crashed", "live"}; !slices.Equal(nl.Known, want) || !strings.Contains(err.Error(), "crashed, live") {
		t.Errorf("unknown lab error %q lists %v, want %v", err, nl.Known, want)
	}
	if err := CheckClean(t.TempDir(), "zz-never-was", false); err == nil || !strings.Contains(err.Error(), "no lab is present") {
		t.Errorf("unknown lab, empty root: %v, want it to say no lab is present", err)
	}
	if err := CheckClean(root, "Bad_Name", false); err == nil || !strings.Contains(err.Error(), "invalid lab name") {
		t.Errorf("bad name: %v", err)
	}
}

func TestCleanableBy(t *testing.T) {
	root := t.TempDir()
	writeTestLab(t, root, "mine-crashed", false, uidp(1000))
	writeTestLab(t, root, "mine-live", true, uidp(1000))
	writeTestLab(t, root, "theirs", false, uidp(1001))
	writeTestLab(t, root, "old", false, nil)
	if err := os.MkdirAll(PathsFor(root, "norecord").Dir, 0o755); err != nil {
		t.Fatal(err)
	}

	reasons := func(s []Skipped) map[string]string {
		m := map[string]string{}
		for _, x := range s {
			m[x.Name] = x.Reason
		}
		return m
	}
	mine, skipped, err := CleanableBy(root, 1000, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"mine-crashed"}; !slices.Equal(mine, want) {
		t.Errorf("cleanable by uid 1000 = %v, want %v", mine, want)
	}
	got := reasons(skipped)
	for name, want := range map[string]string{
		"mine-live": "running (pid",
		"theirs":    "made by uid 1001, not uid 1000",
		"old":       "does not say who made it",
		"norecord":  "no record of who made it",
	} {
		if !strings.Contains(got[name], want) {
			t.Errorf("skipped %s: reason %q, want it to contain %q", name, got[name], want)
		}
	}

	mine, _, err = CleanableBy(root, 1000, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"mine-crashed", "mine-live"}; !slices.Equal(mine, want) {
		t.Errorf("cleanable by uid 1000 with force = %v, want %v", mine, want)
	}
	if mine, _, _ := CleanableBy(root, 1001, true); !slices.Equal(mine, []string{"theirs"}) {
		t.Errorf("cleanable by uid 1001 = %v, want [theirs]", mine)
	}
}

func TestDownOfUnknownLabListsLabs(t *testing.T) {
	root := t.TempDir()
	writeTestLab(t, root, "crashed", false, uidp(1000))
	err := Down(root, "nope", 0, nil)
	var nl *NoSuchLabError
	if !errors.As(err, &nl) || !errors.Is(err, ErrNoLab) || !strings.Contains(err.Error(), `no lab "nope": labs present: crashed`) {
		t.Fatalf("Down of an unknown lab: %v, want a *NoSuchLabError listing crashed", err)
	}
}

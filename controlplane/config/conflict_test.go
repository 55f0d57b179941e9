package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// vsWithVersion is serverMetaBase's VirtualService routing to web with weight w,
// written with resourceVersion rv ("" writes none).
func vsWithVersion(rv string, timeout string) string {
	meta := "{name: web}"
	if rv != "" {
		meta = fmt.Sprintf("{name: web, resourceVersion: %q}", rv)
	}
	return fmt.Sprintf(`
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: %s
spec:
  hosts: [web]
  http: [{timeout: %s, route: [{destination: {host: web}}]}]
`, meta, timeout)
}

// TestApplyRefusesAStaleResourceVersion: an object written with the stored object's
// resourceVersion is taken (and the version moves); written again with that version,
// now stale, it is refused with a *ConflictError and nothing changes; without a
// version it is taken over whatever is stored; the store keeps no written version.
func TestApplyRefusesAStaleResourceVersion(t *testing.T) {
	t.Parallel()
	s, err := Load("base.yaml", []byte(serverMetaBase))
	if err != nil {
		t.Fatal(err)
	}
	seen := fmt.Sprint(stored(t, s, "VirtualService", "web").ResourceVersion)
	first, changes, err := s.Apply(File{Name: "first.yaml", Data: []byte(vsWithVersion(seen, "5s")), LastApplied: true})
	if err != nil {
		t.Fatalf("apply with the stored version: %v", err)
	}
	if len(changes) != 1 || changes[0].Action != "configured" {
		t.Fatalf("changes %v, want the VirtualService configured", changes)
	}
	vs := stored(t, first, "VirtualService", "web")
	if fmt.Sprint(vs.ResourceVersion) == seen {
		t.Fatalf("resourceVersion stayed %s", seen)
	}
	if strings.Contains(string(vs.JSON), `"resourceVersion"`) && !strings.Contains(string(vs.JSON), `\"resourceVersion\"`) {
		t.Fatalf("the store kept the written resourceVersion: %s", vs.JSON)
	}

	second, _, err := first.Apply(File{Name: "second.yaml", Data: []byte(vsWithVersion(seen, "9s")), LastApplied: true})
	var conflict *ConflictError
	if !errors.As(err, &conflict) || second != nil {
		t.Fatalf("stale apply: scenario %v, error %v; want a *ConflictError", second, err)
	}
	if conflict.Ref != (Ref{Kind: "VirtualService", Namespace: DefaultNamespace, Name: "web"}) || conflict.Written != seen || conflict.Stored != vs.ResourceVersion || conflict.File != "second.yaml" {
		t.Fatalf("conflict %+v", conflict)
	}
	if got := stored(t, first, "VirtualService", "web"); got != vs || !strings.Contains(string(got.JSON), `"5s"`) {
		t.Fatalf("the refused apply changed the store: %s", got.JSON)
	}

	// The same stale version with nothing else changed: kubectl's patch still carries it.
	if _, _, err := first.Apply(File{Name: "same.yaml", Data: []byte(vsWithVersion(seen, "5s"))}); !errors.As(err, &conflict) {
		t.Fatalf("stale apply of the same spec: %v, want a *ConflictError", err)
	}
	// Without a version, the write is taken over the latest, as kubectl apply of a file
	// that names none.
	if _, _, err := first.Apply(File{Name: "plain.yaml", Data: []byte(vsWithVersion("", "9s"))}); err != nil {
		t.Fatalf("apply without a version: %v", err)
	}
	// With the latest, too.
	if _, _, err := first.Apply(File{Name: "latest.yaml", Data: []byte(vsWithVersion(fmt.Sprint(vs.ResourceVersion), "9s"))}); err != nil {
		t.Fatalf("apply with the latest version: %v", err)
	}
}

// TestResourceVersionOnCreateAndBadVersions: a created object (a cluster dump's, a
// file from another lab) takes the store's version, not its own; a version that is not
// a positive integer string is refused by field.
func TestResourceVersionOnCreateAndBadVersions(t *testing.T) {
	t.Parallel()
	s, err := Load("dump.yaml", []byte(strings.Replace(serverMetaBase, "metadata: {name: web}\nspec:\n  hosts", `metadata: {name: web, resourceVersion: "4711"}
spec:
  hosts`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	vs := stored(t, s, "VirtualService", "web")
	if vs.ResourceVersion != 3 || strings.Contains(string(vs.JSON), "4711") {
		t.Fatalf("loaded dump: version %d, JSON %s; want the store's 3 and no 4711", vs.ResourceVersion, vs.JSON)
	}
	// A label change re-applies the stored object as it is: no conflict.
	if _, _, err := s.Apply(File{Name: "label.yaml", Data: vs.JSON}); err != nil {
		t.Fatalf("re-apply of the stored object: %v", err)
	}
	for _, tc := range []struct{ name, rv, want string }{
		{name: "not a number", rv: `"abc"`, want: `metadata.resourceVersion: invalid resource version "abc"`},
		{name: "zero", rv: `"0"`, want: `invalid resource version "0"`},
		{name: "an integer", rv: `12`, want: "metadata.resourceVersion: must be a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			doc := strings.Replace(vsWithVersion("", "5s"), "{name: web}", "{name: web, resourceVersion: "+tc.rv+"}", 1)
			next, _, err := s.Apply(File{Name: "bad.yaml", Data: []byte(doc)})
			if err == nil || next != nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "bad.yaml") {
				t.Fatalf("error %v, want one naming bad.yaml and %q", err, tc.want)
			}
		})
	}
}

// FuzzTakeResourceVersion: whatever a document's metadata holds, reading its
// resourceVersion never panics, and a version taken is gone from the document.
func FuzzTakeResourceVersion(f *testing.F) {
	f.Add([]byte(vsWithVersion("12", "5s")))
	f.Add([]byte(vsWithVersion("", "5s")))
	f.Add([]byte("metadata: {resourceVersion: 7}"))
	f.Add([]byte("metadata: [a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var errs ErrorList
		for _, d := range readDocuments("f.yaml", splitDocuments(data), &errs) {
			out, rv := takeResourceVersion(d, problems{list: &errs})
			meta, _ := out.top["metadata"].(map[string]any)
			if _, still := meta["resourceVersion"]; rv != "" && still {
				t.Fatalf("version %q taken but still in %v", rv, out.top)
			}
		}
	})
}

package kubeedit

import (
	"strings"
	"testing"
)

// TestEditPatchCarriesOnlyTheUsersChange: an edit of the object as the server shows it
// applied to the object as written changes only what the user changed (the defaults
// and status shown stay out of the written object), a changed resourceVersion travels
// in the patch, and status and the server-owned metadata do not.
func TestEditPatchCarriesOnlyTheUsersChange(t *testing.T) {
	t.Parallel()
	shown := `{"apiVersion":"v1","kind":"Service","metadata":{"name":"plain","namespace":"default","resourceVersion":"7","uid":"u1","creationTimestamp":"2026-11-30T03:00:00Z"},"spec":{"clusterIP":"10.96.0.20","sessionAffinity":"None","ports":[{"name":"http","port":8080,"protocol":"TCP","targetPort":8080}],"selector":{"app":"backend"}},"status":{"loadBalancer":{}}}`
	written := `{"apiVersion":"v1","kind":"Service","metadata":{"name":"plain"},"spec":{"ports":[{"name":"http","port":8080}],"selector":{"app":"backend"}}}`
	saved := strings.NewReplacer(`"backend"}}`, `"backend","tier":"web"}}`, `"uid":"u1"`, `"uid":"u2"`, `"loadBalancer":{}`, `"loadBalancer":{"ingress":[{"ip":"1.2.3.4"}]}`).Replace(shown)
	patch, typ, err := EditPatch([]byte(shown), []byte(saved))
	if err != nil || typ != Strategic {
		t.Fatalf("patch type %v, error %v", typ, err)
	}
	if string(patch) != `{"spec":{"selector":{"tier":"web"}}}` {
		t.Fatalf("patch %s", patch)
	}
	patched, changed, err := Apply([]byte(written), patch, typ)
	if err != nil || !changed {
		t.Fatalf("apply: %v (changed %v)", err, changed)
	}
	if want := `{"apiVersion":"v1","kind":"Service","metadata":{"name":"plain"},"spec":{"ports":[{"name":"http","port":8080}],"selector":{"app":"backend","tier":"web"}}}`; string(patched) != want {
		t.Fatalf("patched %s\nwant %s", patched, want)
	}

	stale := strings.Replace(shown, `"resourceVersion":"7"`, `"resourceVersion":"5"`, 1)
	patch, _, err = EditPatch([]byte(shown), []byte(stale))
	if err != nil || string(patch) != `{"metadata":{"resourceVersion":"5"}}` {
		t.Fatalf("version edit: patch %s, error %v", patch, err)
	}

	// A CRD's object: a JSON merge patch.
	vs := `{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"r","generation":3},"spec":{"hosts":["a"]}}`
	patch, typ, err = EditPatch([]byte(vs), []byte(strings.Replace(vs, `["a"]`, `["a","b"]`, 1)))
	if err != nil || typ != Merge || string(patch) != `{"spec":{"hosts":["a","b"]}}` {
		t.Fatalf("VirtualService edit: %s (%v), %v", patch, typ, err)
	}
}

// FuzzEditPatch: whatever a user saves (read as JSON), the edit's patch and its
// application to the stored object never panic, and a patch made applies.
func FuzzEditPatch(f *testing.F) {
	shown := `{"apiVersion":"v1","kind":"Service","metadata":{"name":"plain","resourceVersion":"7"},"spec":{"ports":[{"name":"http","port":8080}]},"status":{}}`
	f.Add(shown, strings.Replace(shown, "8080", "9090", 1))
	f.Add(`{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"r"},"spec":{"hosts":["a"]}}`, `{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"r","uid":"x"},"spec":null}`)
	f.Add(shown, `{"metadata":[1]}`)
	f.Fuzz(func(t *testing.T, original, edited string) {
		patch, typ, err := EditPatch([]byte(original), []byte(edited))
		if err != nil {
			return
		}
		_, _, _ = Apply([]byte(original), patch, typ)
	})
}

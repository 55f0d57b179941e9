package config

import (
	"encoding/json"
	"strings"
	"testing"
)

const serverMetaBase = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: docker.io/kennethreitz/httpbin}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, labels: {app: web}}
spec:
  ports: [{name: http, port: 80}]
  selector: {app: web}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web}
spec:
  hosts: [web]
  http: [{route: [{destination: {host: web}}]}]
`

// stored returns the object kind/name of namespace default in s.
func stored(t *testing.T, s *Scenario, kind, name string) *Object {
	t.Helper()
	for _, o := range s.Objects {
		if o.Origin.Kind == kind && o.Origin.Name == name && o.Origin.Namespace == DefaultNamespace {
			return o
		}
	}
	t.Fatalf("no %s %s in the scenario", kind, name)
	return nil
}

// TestServerMetadataMovesAsAnAPIServerMovesIt: a lab's objects come up as kubectl apply
// makes them; each apply after moves the resourceVersion of what it changes, the
// generation of what it changes the spec of, and keeps uid and creation time.
func TestServerMetadataMovesAsAnAPIServerMovesIt(t *testing.T) {
	t.Parallel()
	s, err := Load("base.yaml", []byte(serverMetaBase))
	if err != nil {
		t.Fatal(err)
	}
	svc, vs := stored(t, s, "Service", "web"), stored(t, s, "VirtualService", "web")
	if s.Revision != 3 || svc.ResourceVersion != 2 || vs.ResourceVersion != 3 {
		t.Fatalf("loaded: revision %d, Service at %d, VirtualService at %d; want 3, 2, 3", s.Revision, svc.ResourceVersion, vs.ResourceVersion)
	}
	if svc.UID == "" || vs.UID == "" || svc.UID == vs.UID {
		t.Fatalf("uids %q and %q: want two different ones", svc.UID, vs.UID)
	}
	if svc.Generation != 0 || vs.Generation != 1 {
		t.Fatalf("generations: Service %d (the API server gives none), VirtualService %d (want 1)", svc.Generation, vs.Generation)
	}

	steps := []struct {
		name     string
		doc      string
		action   string
		rv, gen  int64
		revision int64
	}{
		{name: "same again", doc: `{apiVersion: networking.istio.io/v1, kind: VirtualService, metadata: {name: web}, spec: {hosts: [web], http: [{route: [{destination: {host: web}}]}]}}`,
			action: "unchanged", rv: 3, gen: 1, revision: 3},
		{name: "a label: metadata only", doc: `{apiVersion: networking.istio.io/v1, kind: VirtualService, metadata: {name: web, labels: {team: a}}, spec: {hosts: [web], http: [{route: [{destination: {host: web}}]}]}}`,
			action: "configured", rv: 4, gen: 1, revision: 4},
		{name: "the spec", doc: `{apiVersion: networking.istio.io/v1, kind: VirtualService, metadata: {name: web, labels: {team: a}}, spec: {hosts: [web], http: [{timeout: 5s, route: [{destination: {host: web}}]}]}}`,
			action: "configured", rv: 5, gen: 2, revision: 5},
	}
	for _, st := range steps {
		next, changes, err := s.Apply(File{Name: st.name, Data: []byte(st.doc), LastApplied: true})
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if len(changes) != 1 || changes[0].Action != st.action {
			t.Fatalf("%s: changes %v, want one %s", st.name, changes, st.action)
		}
		got := stored(t, next, "VirtualService", "web")
		if got.UID != vs.UID || got.ResourceVersion != st.rv || got.Generation != st.gen || next.Revision != st.revision || !got.Created.Equal(vs.Created) {
			t.Fatalf("%s: uid %s rv %d generation %d revision %d created %v; want uid %s rv %d generation %d revision %d created %v",
				st.name, got.UID, got.ResourceVersion, got.Generation, next.Revision, got.Created, vs.UID, st.rv, st.gen, st.revision, vs.Created)
		}
		s = next
	}
	if stored(t, s, "Service", "web").ResourceVersion != 2 {
		t.Fatal("the Service moved with the VirtualService's writes")
	}

	deleted, _, err := s.Delete(Ref{Kind: "VirtualService", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if deleted.Revision != s.Revision+1 {
		t.Fatalf("delete: revision %d, want %d (a delete is a write)", deleted.Revision, s.Revision+1)
	}
	again, _, err := deleted.Apply(File{Name: "again", Data: []byte(steps[0].doc)})
	if err != nil {
		t.Fatal(err)
	}
	if re := stored(t, again, "VirtualService", "web"); re.UID == vs.UID || re.Generation != 1 || re.ResourceVersion != deleted.Revision+1 {
		t.Fatalf("created again: uid %s (was %s) generation %d rv %d; want a new uid, generation 1, rv %d", re.UID, vs.UID, re.Generation, re.ResourceVersion, deleted.Revision+1)
	}
}

func TestLastAppliedIsKubectlApplysRecord(t *testing.T) {
	t.Parallel()
	doc := `apiVersion: v1
kind: Service
metadata:
  name: details
  labels: {app: details}
spec:
  ports: [{port: 9080, name: http}]
  selector: {app: details}
`
	cases := []struct {
		name      string
		file      File
		doc       string
		wantAnnot string // "" for none
	}{
		{name: "apply", file: File{LastApplied: true},
			wantAnnot: `{"apiVersion":"v1","kind":"Service","metadata":{"annotations":{},"labels":{"app":"details"},"name":"details","namespace":"default"},"spec":{"ports":[{"name":"http","port":9080}],"selector":{"app":"details"}}}` + "\n"},
		{name: "apply -n", file: File{LastApplied: true, Namespace: "shop"},
			wantAnnot: `{"apiVersion":"v1","kind":"Service","metadata":{"annotations":{},"labels":{"app":"details"},"name":"details","namespace":"shop"},"spec":{"ports":[{"name":"http","port":9080}],"selector":{"app":"details"}}}` + "\n"},
		{name: "apply keeps other annotations, replaces an old record",
			file: File{LastApplied: true},
			doc: strings.Replace(doc, "labels: {app: details}", `labels: {app: details}
  annotations: {team: a, kubectl.kubernetes.io/last-applied-configuration: old}`, 1),
			wantAnnot: `{"apiVersion":"v1","kind":"Service","metadata":{"annotations":{"team":"a"},"labels":{"app":"details"},"name":"details","namespace":"default"},"spec":{"ports":[{"name":"http","port":9080}],"selector":{"app":"details"}}}` + "\n"},
		{name: "a cluster-scoped kind has no namespace", file: File{LastApplied: true},
			doc:       "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n",
			wantAnnot: `{"apiVersion":"v1","kind":"Namespace","metadata":{"annotations":{},"name":"shop"}}` + "\n"},
		{name: "create does not record", file: File{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := tc.file
			f.Name, f.Data = "f.yaml", []byte(doc)
			if tc.doc != "" {
				f.Data = []byte(tc.doc)
			}
			next, _, err := (&Scenario{}).Apply(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(next.Objects) != 1 {
				t.Fatalf("%d objects", len(next.Objects))
			}
			o := next.Objects[0]
			var m struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(o.JSON, &m); err != nil {
				t.Fatal(err)
			}
			got, has := m.Metadata.Annotations[LastAppliedAnnotation]
			if tc.wantAnnot == "" {
				if has {
					t.Fatalf("annotation %q, want none", got)
				}
				return
			}
			if got != tc.wantAnnot {
				t.Fatalf("last-applied-configuration:\n got %q\nwant %q", got, tc.wantAnnot)
			}
			// Applying the same file again changes nothing, as kubectl apply's unchanged.
			_, changes, err := next.Apply(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(changes) != 1 || changes[0].Action != "unchanged" {
				t.Fatalf("applied again: %v, want unchanged", changes)
			}
		})
	}
}

func FuzzWithLastApplied(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: a, annotations: {x: y}}\nspec: {ports: [{port: 1}]}\n"), "ns")
	f.Add([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: a, annotations: 3}\n"), "")
	f.Add([]byte("kind: List\nitems: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}]\n"), "")
	f.Fuzz(func(t *testing.T, data []byte, namespace string) {
		next, _, err := (&Scenario{}).Apply(File{Name: "fuzz.yaml", Data: data, Namespace: namespace, LastApplied: true})
		if err != nil {
			return
		}
		for _, o := range next.Objects {
			var m struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(o.JSON, &m); err != nil {
				t.Fatalf("stored %s does not read: %v", o.Origin, err)
			}
			rec := m.Metadata.Annotations[LastAppliedAnnotation]
			var back map[string]any
			if err := json.Unmarshal([]byte(rec), &back); err != nil || !strings.HasSuffix(rec, "\n") {
				t.Fatalf("%s: record %q is not JSON and a newline: %v", o.Origin, rec, err)
			}
		}
	})
}

// TestApplyAfterCreateIsConfiguredAndUnrecorded: kubectl apply of an object create made
// is configured (its record patched in) with kubectl's warning, then unchanged.
func TestApplyAfterCreateIsConfiguredAndUnrecorded(t *testing.T) {
	t.Parallel()
	doc := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n")
	created, _, err := (&Scenario{}).Apply(File{Name: "c.yaml", Data: doc})
	if err != nil {
		t.Fatal(err)
	}
	applied, changes, err := created.Apply(File{Name: "c.yaml", Data: doc, LastApplied: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Action != "configured" || !changes[0].Unrecorded {
		t.Fatalf("apply after create: %+v, want configured and unrecorded", changes)
	}
	_, changes, err = applied.Apply(File{Name: "c.yaml", Data: doc, LastApplied: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Action != "unchanged" || changes[0].Unrecorded {
		t.Fatalf("apply again: %+v, want unchanged", changes)
	}
}

// TestLastAppliedIsNotCountedInTheSizeLimit: the lab's size limit weighs objects as
// written; kubectl apply's record of each (the object again) is not counted.
func TestLastAppliedIsNotCountedInTheSizeLimit(t *testing.T) {
	t.Parallel()
	doc := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n")
	plain, _, err := (&Scenario{}).Apply(File{Name: "c.yaml", Data: doc})
	if err != nil {
		t.Fatal(err)
	}
	applied, _, err := (&Scenario{}).Apply(File{Name: "c.yaml", Data: doc, LastApplied: true})
	if err != nil {
		t.Fatal(err)
	}
	p, a := plain.Objects[0], applied.Objects[0]
	if len(a.JSON) <= len(p.JSON) || len(a.JSON)-a.recordBytes > len(p.JSON)+len(`"annotations":{},`) {
		t.Fatalf("weights: applied %d - record %d, created %d", len(a.JSON), a.recordBytes, len(p.JSON))
	}
}

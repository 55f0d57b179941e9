package kubeedit

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestEditorArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env       map[string]string
		path      string
		want      []string
		wantShell bool
	}{
		{env: map[string]string{}, want: []string{"vi", "/tmp/f.yaml"}},
		{env: map[string]string{"EDITOR": "nano"}, want: []string{"nano", "/tmp/f.yaml"}},
		{env: map[string]string{"EDITOR": "nano", "KUBE_EDITOR": "code --wait"}, want: []string{"code", "--wait", "/tmp/f.yaml"}},
		{env: map[string]string{"KUBE_EDITOR": `sed -i 's/a/b/'`, "SHELL": "/bin/sh"}, want: []string{"/bin/sh", "-c", `sed -i 's/a/b/' "/tmp/f.yaml"`}, wantShell: true},
	} {
		args, shell := EditorArgs(func(k string) string { return tc.env[k] })
		if shell != tc.wantShell {
			t.Errorf("EditorArgs(%v): shell %v, want %v", tc.env, shell, tc.wantShell)
		}
		if got := WithPath(args, shell, "/tmp/f.yaml"); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("EditorArgs(%v) with the path = %q, want %q", tc.env, got, tc.want)
		}
	}
}

func TestEditFileRoundTrip(t *testing.T) {
	t.Parallel()
	file, err := RenderForEdit([]byte(detailsService), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(file), editHeader+"apiVersion: v1\n") {
		t.Fatalf("edit file:\n%s\nwant kubectl's header, then the object as YAML", file)
	}
	back, empty, err := ReadEdited(file)
	if err != nil || empty {
		t.Fatalf("ReadEdited: %v (empty %v)", err, empty)
	}
	if changed, err := Edited([]byte(detailsService), back); err != nil || changed {
		t.Fatalf("the file saved as opened: changed %v, %v; want no change\n%s", changed, err, back)
	}
	edited := strings.Replace(string(file), "name: http", "name: foo", 1)
	back, _, err = ReadEdited([]byte(edited))
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := Edited([]byte(detailsService), back); err != nil || !changed {
		t.Fatalf("the port renamed: changed %v, %v; want a change", changed, err)
	}
	renamed := strings.Replace(string(file), "name: details\n", "name: other\n", 1)
	back, _, _ = ReadEdited([]byte(renamed))
	if _, err := Edited([]byte(detailsService), back); err == nil || !strings.Contains(err.Error(), "does not match the name on the URL") {
		t.Fatalf("the object renamed: %v, want the server's refusal", err)
	}
	if _, empty, _ := ReadEdited([]byte("# only comments\n\n#\n")); !empty {
		t.Fatal("a file of comments is not empty, want kubectl's empty-file cancel")
	}
	if _, _, err := ReadEdited([]byte("a: [\n")); err == nil || !strings.HasPrefix(err.Error(), "The edited file had a syntax error: ") {
		t.Fatalf("a syntax error: %v, want kubectl's", err)
	}
	reopened := RenderText([]byte("a: 1\n"), []Reason{{Head: `configmaps "istio" was not valid`, Causes: []string{"data.mesh: x: no\nmore"}}})
	want := editHeader + "# configmaps \"istio\" was not valid:\n# * data.mesh: x: no\n# more\n#\na: 1\n"
	if string(reopened) != want {
		t.Fatalf("reopened file:\n%s\nwant:\n%s", reopened, want)
	}
}

// FuzzReadEdited holds the reading of a saved edit file to never panic and to return a
// JSON object whenever it succeeds.
func FuzzReadEdited(f *testing.F) {
	file, err := RenderForEdit([]byte(detailsService), []Reason{{Head: "x", Causes: []string{"y"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(file)
	f.Add([]byte("# only\n"))
	f.Add([]byte("a: [\n"))
	f.Add([]byte("- 1\n- 2\n"))
	f.Fuzz(func(t *testing.T, saved []byte) {
		js, empty, err := ReadEdited(saved)
		if err != nil || empty {
			return
		}
		var v map[string]any
		if json.Unmarshal(js, &v) != nil {
			t.Fatalf("ReadEdited returned %q, not a JSON object", js)
		}
		_, _ = Edited([]byte(detailsService), js)
	})
}

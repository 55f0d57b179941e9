package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestKubectlApplyConflict is optimistic concurrency as a learner meets it: two copies
// of a Service saved with `get -o yaml`, each changed and applied. The first is taken;
// the second carries the resourceVersion both were saved at, now stale, and is refused
// with kubectl apply's Conflict (its patch, the object, the API server's words) and
// nothing changed. The same change without the version is taken, and a label after it
// (which writes the stored object again) does not conflict.
func TestKubectlApplyConflict(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "../scenarios/hello.yaml")
	run := func(args ...string) string {
		t.Helper()
		out, err := meshlab(t, append([]string{"--lab", l.name}, args...)...)
		if err != nil {
			t.Fatalf("meshlab %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := write("plain.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: plain\nspec:\n  selector: {app: backend}\n  ports: [{name: http, port: 8080}]\n")
	if out := run("apply", "-f", plain); out != "service/plain created\n" {
		t.Fatalf("apply: %q", out)
	}
	saved := run("get", "svc", "plain", "-o", "yaml")
	rv := regexp.MustCompile(`(?m)^  resourceVersion: "(\d+)"$`).FindStringSubmatch(saved)
	if rv == nil {
		t.Fatalf("get -o yaml shows no resourceVersion:\n%s", saved)
	}
	mine := write("mine.yaml", strings.Replace(saved, "port: 8080", "port: 9090", 1))
	theirs := write("theirs.yaml", strings.Replace(saved, "  name: plain\n", "  labels:\n    team: blue\n  name: plain\n", 1))
	if out := run("apply", "-f", mine); out != "service/plain configured\n" {
		t.Fatalf("first apply of the saved copy: %q", out)
	}
	type svc struct {
		Metadata struct {
			ResourceVersion string            `json:"resourceVersion"`
			Labels          map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Ports []struct {
				Port int `json:"port"`
			} `json:"ports"`
		} `json:"spec"`
	}
	get := func() svc {
		t.Helper()
		var s svc
		if err := json.Unmarshal([]byte(run("get", "svc", "plain", "-o", "json")), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	after := get()
	if after.Metadata.ResourceVersion == rv[1] || len(after.Spec.Ports) != 1 || after.Spec.Ports[0].Port != 9090 {
		t.Fatalf("after the first apply: %+v", after)
	}

	stdout, stderr, err := meshlabSplit(t, nil, "--lab", l.name, "apply", "-f", theirs)
	if err == nil || stdout != "" {
		t.Fatalf("stale apply: err %v, stdout %q, stderr %q; want kubectl's Conflict", err, stdout, stderr)
	}
	head := "Error from server (Conflict): error when applying patch:\n{"
	tail := "}\nto:\n" +
		`Resource: "/v1, Resource=services", GroupVersionKind: "/v1, Kind=Service"` + "\n" +
		`Name: "plain", Namespace: "default"` + "\n" +
		`for: "` + theirs + `": error when patching "` + theirs + `": Operation cannot be fulfilled on services "plain": the object has been modified; please apply your changes to the latest version and try again` + "\n"
	if !strings.HasPrefix(stderr, head) || !strings.HasSuffix(stderr, tail) {
		t.Fatalf("stale apply said\n%s\nwant\n%s...%s", stderr, head, tail)
	}
	patch := strings.TrimSuffix(strings.TrimPrefix(stderr, head[:len(head)-1]), tail[1:])
	for _, want := range []string{`"resourceVersion":"` + rv[1] + `"`, `"labels":{"team":"blue"}`} {
		if !strings.Contains(patch, want) {
			t.Errorf("the printed patch lacks %s: %s", want, patch)
		}
	}
	if now := get(); now.Metadata.ResourceVersion != after.Metadata.ResourceVersion || now.Metadata.Labels["team"] != "" || now.Spec.Ports[0].Port != 9090 {
		t.Fatalf("the refused apply changed the Service: %+v", now)
	}

	// Without the version the change is taken over the latest, as kubectl apply takes it.
	unversioned := write("theirs-unversioned.yaml", regexp.MustCompile(`(?m)^  resourceVersion: .*\n`).ReplaceAllString(strings.Replace(saved, "  name: plain\n", "  labels:\n    team: blue\n  name: plain\n", 1), ""))
	if out := run("apply", "-f", unversioned); out != "service/plain configured\n" {
		t.Fatalf("apply without the version: %q", out)
	}
	if out := run("label", "svc", "plain", "tier=web"); out != "service/plain labeled\n" {
		t.Fatalf("label after: %q", out)
	}
	if now := get(); now.Metadata.Labels["team"] != "blue" || now.Metadata.Labels["tier"] != "web" || now.Spec.Ports[0].Port != 8080 {
		t.Fatalf("after the unversioned apply and the label: %+v", now)
	}

	// edit opens the object as the server returns it and writes only the change.
	editor := write("editor.sh", "#!/bin/sh\ncp \"$1\" \"$EDIT_SHOWN\"\nsed -i \"$EDIT_SED\" \"$1\"\n")
	if err := os.Chmod(editor, 0o755); err != nil {
		t.Fatal(err)
	}
	shown := filepath.Join(dir, "shown.yaml")
	edit := func(sed string) (string, string, error) {
		return meshlabSplit(t, []string{"KUBE_EDITOR=" + editor, "EDIT_SED=" + sed, "EDIT_SHOWN=" + shown, "TMPDIR=" + dir}, "--lab", l.name, "edit", "svc", "plain")
	}
	before := get()
	if out, errOut, err := edit("s/port: 8080/port: 9191/"); err != nil || out != "service/plain edited\n" {
		t.Fatalf("edit: %v\n%s%s", err, out, errOut)
	}
	opened, err := os.ReadFile(shown)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`resourceVersion: "` + before.Metadata.ResourceVersion + `"`, "sessionAffinity: None", "status:", "tier: web"} {
		if !strings.Contains(string(opened), want) {
			t.Errorf("edit opened no %q:\n%s", want, opened)
		}
	}
	edited := get()
	if edited.Spec.Ports[0].Port != 9191 || edited.Metadata.Labels["tier"] != "web" || edited.Metadata.ResourceVersion == before.Metadata.ResourceVersion {
		t.Fatalf("after edit: %+v", edited)
	}
	// An edit that sets the version it read before someone else's write is refused.
	out, errOut, err := edit(`s/resourceVersion: "` + edited.Metadata.ResourceVersion + `"/resourceVersion: "` + rv[1] + `"/`)
	wantOut := `error: services "plain" could not be patched: Operation cannot be fulfilled on services "plain": the object has been modified; please apply your changes to the latest version and try again` + "\n"
	if err == nil || out != wantOut || !strings.Contains(errOut, "You can run `meshlab apply -f "+dir) || !strings.Contains(errOut, "` to try this update again") {
		t.Fatalf("stale edit: err %v\nstdout %q\nstderr %q\nwant stdout %q", err, out, errOut, wantOut)
	}
	if now := get(); now.Metadata.ResourceVersion != edited.Metadata.ResourceVersion {
		t.Fatalf("the refused edit moved the version: %s, was %s", now.Metadata.ResourceVersion, edited.Metadata.ResourceVersion)
	}
}

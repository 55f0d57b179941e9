package podcp

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestParseArgs holds cp's argument forms to kubectl's: LOCAL POD:PATH, POD:PATH LOCAL,
// NAMESPACE/POD:PATH, and kubectl's errors for the rest.
func TestParseArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		src, dest string
		from, to  FileSpec
		err       string
	}{
		{name: "to pod dir", src: "client.key", dest: "default/sleep-1:/tmp/",
			from: FileSpec{File: "client.key"}, to: FileSpec{Namespace: "default", Pod: "sleep-1", File: "/tmp"}},
		{name: "to pod file", src: "example.com.crt", dest: "sleep-1:/tmp/ca.crt",
			from: FileSpec{File: "example.com.crt"}, to: FileSpec{Pod: "sleep-1", File: "/tmp/ca.crt"}},
		{name: "from pod", src: "test/httpbin-1:/etc/hosts", dest: "./hosts",
			from: FileSpec{Namespace: "test", Pod: "httpbin-1", File: "/etc/hosts"}, to: FileSpec{File: "./hosts"}},
		{name: "root stays", src: "a", dest: "p:/", from: FileSpec{File: "a"}, to: FileSpec{Pod: "p", File: "/"}},
		{name: "windows separators", src: "a", dest: `p:\tmp\x`, from: FileSpec{File: "a"}, to: FileSpec{Pod: "p", File: "/tmp/x"}},
		{name: "both remote", src: "p:/a", dest: "q:/b", err: "one of src or dest must be a local file specification"},
		{name: "both local", src: "a", dest: "b", err: "one of src or dest must be a remote file specification"},
		{name: "empty remote path", src: "a", dest: "p:", err: "filepath can not be empty"},
		{name: "leading colon", src: ":a", dest: "p:/b", err: "filespec must match the canonical format: [[namespace/]pod:]file/path"},
		{name: "too many slashes", src: "a", dest: "x/y/p:/b", err: "filespec must match the canonical format"},
		{name: "empty namespace", src: "a", dest: "/p:/b", err: "filespec must match the canonical format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			from, to, err := ParseArgs(tc.src, tc.dest)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseArgs(%q, %q) = %v, want %q", tc.src, tc.dest, err, tc.err)
				}
			case err != nil:
				t.Fatalf("ParseArgs(%q, %q): %v", tc.src, tc.dest, err)
			case from != tc.from || to != tc.to:
				t.Fatalf("ParseArgs(%q, %q) = %+v, %+v, want %+v, %+v", tc.src, tc.dest, from, to, tc.from, tc.to)
			}
		})
	}
}

// TestCheckDest: a copy into a pod goes under its /tmp; elsewhere it is refused by path.
func TestCheckDest(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"/tmp", "/tmp/", "/tmp/ca.crt", "tmp/x", "/tmp/a/../b"} {
		if err := CheckDest(ok); err != nil {
			t.Errorf("CheckDest(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"/", "/etc/ca.crt", "/tmp/../etc/passwd", "/tmpx", "/var/tmp/x", "etc"} {
		err := CheckDest(bad)
		if err == nil || !strings.Contains(err.Error(), "cp into a pod: "+bad+": a meshlab pod writes only in its own /tmp") {
			t.Errorf("CheckDest(%q) = %v, want the refusal naming it", bad, err)
		}
	}
}

// localPod runs the pod's commands on this machine with the pod's / at root, recording
// them: the same tar, test and streams a pod's would be.
type localPod struct {
	root  string
	calls [][]string
}

func (p *localPod) run(_ context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	p.calls = append(p.calls, argv)
	args := append([]string(nil), argv[1:]...)
	for i, a := range args {
		if strings.HasPrefix(a, "/") {
			args[i] = filepath.Join(p.root, a) // the pod's paths under root
		}
	}
	if argv[0] == "tar" && args[len(args)-1] != "-" && argv[1] == "cf" {
		// tar cf - /PATH in the pod names entries PATH: run it from root, relative.
		rel, _ := filepath.Rel(p.root, args[len(args)-1])
		args = []string{"cf", "-", "-C", p.root, rel}
	}
	c := exec.Command(argv[0], args...)
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	return c.Run()
}

// TestToPodAndBack copies a file into a pod's /tmp (a directory: under its base name),
// to a file path, a directory tree, and back out, with kubectl's commands in the pod.
func TestToPodAndBack(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("no tar on this machine (kubectl cp needs the container's tar)")
	}
	local, podRoot := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(podRoot, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(local, "client.key"), "KEY\n")
	write(filepath.Join(local, "example.com.crt"), "CA\n")
	write(filepath.Join(local, "dir", "sub", "a"), "A\n")
	pod := &localPod{root: podRoot}
	ctx := context.Background()
	var stderr bytes.Buffer
	for _, c := range []struct{ src, dest string }{
		{"client.key", "/tmp/"}, {"example.com.crt", "/tmp/ca.crt"}, {"dir", "/tmp/tree"},
	} {
		if err := ToPod(ctx, pod.run, filepath.Join(local, c.src), c.dest, false, io.Discard, &stderr); err != nil {
			t.Fatalf("cp %s %s: %v\n%s", c.src, c.dest, err, stderr.String())
		}
	}
	for p, want := range map[string]string{"tmp/client.key": "KEY\n", "tmp/ca.crt": "CA\n", "tmp/tree/sub/a": "A\n"} {
		if b, err := os.ReadFile(filepath.Join(podRoot, p)); err != nil || string(b) != want {
			t.Errorf("pod's /%s = %q (%v), want %q", p, b, err, want)
		}
	}
	want := [][]string{
		{"test", "-d", "/tmp"}, {"tar", "-xmf", "-", "-C", "/tmp"},
		{"test", "-d", "/tmp/ca.crt"}, {"tar", "-xmf", "-", "-C", "/tmp"},
		{"test", "-d", "/tmp/tree"}, {"tar", "-xmf", "-", "-C", "/tmp"},
	}
	if !reflect.DeepEqual(pod.calls, want) {
		t.Errorf("commands run in the pod:\n%q\nwant kubectl's:\n%q", pod.calls, want)
	}
	if err := ToPod(ctx, pod.run, filepath.Join(local, "missing"), "/tmp/", false, io.Discard, &stderr); err == nil ||
		err.Error() != filepath.Join(local, "missing")+" doesn't exist in local filesystem" {
		t.Errorf("cp of a missing file: %v, want kubectl's message", err)
	}

	back := t.TempDir()
	if err := FromPod(ctx, pod.run, "/tmp/ca.crt", filepath.Join(back, "ca.crt"), &stderr); err != nil {
		t.Fatalf("cp pod:/tmp/ca.crt: %v\n%s", err, stderr.String())
	}
	if err := FromPod(ctx, pod.run, "/tmp/tree", filepath.Join(back, "tree"), &stderr); err != nil {
		t.Fatalf("cp pod:/tmp/tree: %v\n%s", err, stderr.String())
	}
	for p, want := range map[string]string{"ca.crt": "CA\n", "tree/sub/a": "A\n"} {
		if b, err := os.ReadFile(filepath.Join(back, p)); err != nil || string(b) != want {
			t.Errorf("copied back %s = %q (%v), want %q", p, b, err, want)
		}
	}
	if err := FromPod(ctx, pod.run, "/tmp/none", filepath.Join(back, "none"), io.Discard); err == nil {
		t.Error("cp of a file the pod does not have: no error")
	}
}

// FuzzParseArgs: any two arguments parse or fail without panicking; a parse that
// succeeds names exactly one pod, non-empty paths, and a namespace only with a pod.
func FuzzParseArgs(f *testing.F) {
	for _, s := range [][2]string{
		{"client.key", "default/sleep-1:/tmp/"}, {"test/httpbin:/etc/hosts", "./h"}, {":x", "p:/"},
		{"a", "x/y/z:/b"}, {"a", `p:\tmp\`}, {"", ""}, {"a:b:c", "d"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, src, dest string) {
		from, to, err := ParseArgs(src, dest)
		if err != nil {
			return
		}
		if from.Remote() == to.Remote() {
			t.Fatalf("ParseArgs(%q, %q): both or neither remote: %+v %+v", src, dest, from, to)
		}
		for _, s := range []FileSpec{from, to} {
			if s.File == "" || (s.Namespace != "" && s.Pod == "") || strings.Contains(s.Pod, "/") {
				t.Fatalf("ParseArgs(%q, %q): bad spec %+v", src, dest, s)
			}
		}
		_ = CheckDest(to.File)
	})
}

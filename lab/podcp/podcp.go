// Package podcp is kubectl cp for a lab's pods, done as kubectl does it: a tar stream
// through a command run in the pod's app container (`tar -xmf - -C DIR` to copy in,
// `tar cf - PATH` to copy out), so the files land with the app's uid in what the app
// sees. What it cannot mean in a lab it refuses by name: a meshlab pod's filesystem is
// the host's, read-only to its app, but for its own /tmp (netns.Sandbox's Tmp), so a
// copy into a pod goes under /tmp only.
package podcp

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// FileSpec is one argument of cp: a local file (Pod empty) or [[NAMESPACE/]POD:]PATH.
type FileSpec struct {
	Namespace string // optional: the pod's namespace, "" for cp's -n (or any)
	Pod       string // "" for a local path
	File      string // never empty once parsed by ParseArgs
}

// Remote reports whether s names a file in a pod.
func (s FileSpec) Remote() bool { return s.Pod != "" }

// errFileSpec is kubectl's message for an argument that is not a file spec.
var errFileSpec = errors.New("filespec must match the canonical format: [[namespace/]pod:]file/path")

// ParseFileSpec reads one argument as kubectl's extractFileSpec does: no colon is a
// local path; before the first colon, POD or NAMESPACE/POD; a leading colon, or more than
// one slash before the colon, is not a file spec. A trailing slash is dropped (but
// from "/"), as kubectl's paths drop it.
func ParseFileSpec(arg string) (FileSpec, error) {
	i := strings.Index(arg, ":")
	switch {
	case i == 0:
		return FileSpec{}, errFileSpec
	case i < 0:
		return FileSpec{File: stripTrailingSlash(arg)}, nil
	}
	pod, file := arg[:i], stripTrailingSlash(strings.ReplaceAll(arg[i+1:], `\`, "/"))
	switch pieces := strings.Split(pod, "/"); len(pieces) {
	case 1:
		return FileSpec{Pod: pieces[0], File: file}, nil
	case 2:
		if pieces[0] == "" || pieces[1] == "" {
			return FileSpec{}, errFileSpec
		}
		return FileSpec{Namespace: pieces[0], Pod: pieces[1], File: file}, nil
	}
	return FileSpec{}, errFileSpec
}

func stripTrailingSlash(p string) string {
	if len(p) > 1 && strings.HasSuffix(p, "/") {
		return p[:len(p)-1]
	}
	return p
}

// ParseArgs reads cp's two arguments as kubectl's Run does: one of them local, the other
// in a pod, neither path empty.
func ParseArgs(src, dest string) (from, to FileSpec, err error) {
	if from, err = ParseFileSpec(src); err != nil {
		return from, to, err
	}
	if to, err = ParseFileSpec(dest); err != nil {
		return from, to, err
	}
	switch {
	case from.Remote() && to.Remote():
		return from, to, errors.New("one of src or dest must be a local file specification")
	case from.File == "" || to.File == "":
		return from, to, errors.New("filepath can not be empty")
	case !from.Remote() && !to.Remote():
		return from, to, errors.New("one of src or dest must be a remote file specification")
	}
	return from, to, nil
}

// PodTmp is the one directory of a meshlab pod its app writes in: its own /tmp.
const PodTmp = "/tmp"

// podPath is a path in the pod as the container's tar reads it: relative ones are from
// the app's working directory, /.
func podPath(p string) string { return path.Clean("/" + p) }

// CheckDest refuses a destination in a pod outside its /tmp, by name and with why.
func CheckDest(dest string) error {
	p := podPath(dest)
	if p == PodTmp || strings.HasPrefix(p, PodTmp+"/") {
		return nil
	}
	return fmt.Errorf("cp into a pod: %s: a meshlab pod writes only in its own /tmp (the rest of its filesystem is the host's, "+
		"read-only to its app: there is no image filesystem to copy into); copy to a path under /tmp and give the pod's command that path", dest)
}

// Runner runs argv in the pod's app container as `meshlab exec` does (its namespaces, its
// uid), with the given streams; a command that exits non-zero is an error.
type Runner func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error

// ToPod copies the local file or directory src into the pod at dest, as kubectl's
// copyToPod: when dest is a directory in the pod (`test -d`), into it under src's
// base name; the tar stream names the files by their destination, and the pod's tar
// extracts it in the destination's directory (`tar -xmf - -C DIR`; with noPreserve,
// `--no-same-permissions --no-same-owner` first). CheckDest must have passed.
func ToPod(ctx context.Context, run Runner, src, dest string, noPreserve bool, stdout, stderr io.Writer) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("%s doesn't exist in local filesystem", src)
	}
	dest = podPath(dest)
	if err := run(ctx, []string{"test", "-d", dest}, nil, io.Discard, io.Discard); err == nil {
		dest = path.Join(dest, filepath.Base(filepath.Clean(src)))
	}
	reader, writer := io.Pipe()
	go func() {
		writer.CloseWithError(makeTar(filepath.Clean(src), path.Base(dest), writer))
	}()
	argv := []string{"tar", "-xmf", "-"}
	if noPreserve {
		argv = []string{"tar", "--no-same-permissions", "--no-same-owner", "-xmf", "-"}
	}
	argv = append(argv, "-C", path.Dir(dest))
	err := run(ctx, argv, reader, stdout, stderr)
	_ = reader.CloseWithError(io.ErrClosedPipe) // ends makeTar if tar stopped reading
	return err
}

// makeTar writes src (a file, or a directory and everything in it) as a tar stream whose
// names start at name, as kubectl's recursiveTar: symlinks as links, an empty directory
// as itself.
func makeTar(src, name string, w io.Writer) error {
	tw := tar.NewWriter(w)
	if err := addTar(tw, src, name); err != nil {
		return err
	}
	return tw.Close()
}

func addTar(tw *tar.Writer, src, name string) error {
	st, err := os.Lstat(src)
	if err != nil {
		return err
	}
	link := ""
	if st.Mode()&os.ModeSymlink != 0 {
		if link, err = os.Readlink(src); err != nil {
			return err
		}
	}
	if st.IsDir() {
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		if len(entries) > 0 {
			for _, e := range entries {
				if err := addTar(tw, filepath.Join(src, e.Name()), path.Join(name, e.Name())); err != nil {
					return err
				}
			}
			return nil
		}
	}
	hdr, err := tar.FileInfoHeader(st, link)
	if err != nil {
		return fmt.Errorf("tar %s: %w", src, err)
	}
	hdr.Name = name
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

// FromPod copies the pod's file or directory src to the local dest, as kubectl's
// copyFromPod: the pod's `tar cf - SRC` is read, each entry's name with SRC's own path
// (tar strips the leading /) cut off is written below dest; an entry that would land
// outside dest is skipped with kubectl's warning, a symlink skipped with its warning.
func FromPod(ctx context.Context, run Runner, src, dest string, stderr io.Writer) error {
	src = podPath(src)
	reader, writer := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"tar", "cf", "-", src}, nil, writer, stderr)
		writer.CloseWithError(err)
		done <- err
	}()
	err := untar(reader, stripShortcuts(strings.TrimLeft(src, "/")), dest, stderr)
	if err == nil {
		_, _ = io.Copy(io.Discard, reader) // tar's padding after the archive's end
	}
	_ = reader.CloseWithError(io.ErrClosedPipe)
	if runErr := <-done; runErr != nil {
		return runErr
	}
	return err
}

// untar writes the entries of r whose names begin with prefix below dest.
func untar(r io.Reader, prefix, dest string, stderr io.Writer) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !strings.HasPrefix(hdr.Name, prefix) {
			return errors.New("tar contents corrupted")
		}
		out := filepath.Join(dest, path.Clean("/"+strings.TrimPrefix(hdr.Name, prefix)))
		if !within(dest, out) {
			fmt.Fprintf(stderr, "warning: file %q is outside target destination, skipping\n", out)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		switch {
		case hdr.FileInfo().IsDir():
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			continue
		case hdr.FileInfo().Mode()&os.ModeSymlink != 0:
			fmt.Fprintf(stderr, "warning: skipping symlink: %q -> %q\n", out, hdr.Linkname)
			continue
		case !hdr.FileInfo().Mode().IsRegular():
			continue
		}
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
}

// within reports whether target is base or below it.
func within(base, target string) bool {
	rel, err := filepath.Rel(base, target)
	return err == nil && (rel == "." || rel == stripShortcuts(rel))
}

// stripShortcuts removes leading "../" and a leftover "." or "..", as kubectl's
// stripPathShortcuts.
func stripShortcuts(p string) string {
	for strings.HasPrefix(p, "../") {
		p = strings.TrimPrefix(p, "../")
	}
	if p == "." || p == ".." {
		return ""
	}
	return strings.TrimPrefix(p, "/")
}

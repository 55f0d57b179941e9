package bugreport

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/meshlab/meshlab/controlplane/config"
)

// Limits on an archive. A bug report of a large cluster, with every proxy's logs and
// config dumps, runs to hundreds of megabytes; meshlab reads only the few files a lab is
// made of, each held to the scenario file limit, and stops reading a stream that inflates
// past MaxArchiveBytes or holds more than MaxEntries files.
const (
	MaxArchiveBytes = 2 << 30
	MaxEntries      = 200000
)

// marker is the file whose presence makes a directory a bug report's root: istioctl
// always writes the namespaced resources there.
const marker = "cluster/k8s-resources"

// files is what reading an archive or a directory keeps: the wanted files by path
// relative to the report's root, and the proxies whose dumps it holds.
type files struct {
	root    string            // the root's path in the archive ("" or "bug-report")
	data    map[string][]byte // wanted files, by path under root
	proxies []string          // namespace/pod of each proxies/<ns>/<pod> directory
	istiods []string          // namespace/pod of each istio/<ns>/<pod> directory
	unkept  []string          // proxy dumps not read: past maxKeptBytes of them
}

// wanted reports whether a file under the report's root is one meshlab reads.
func wanted(rel string) bool {
	switch rel {
	case "versions", "cluster/k8s-cluster-resources", marker, "cluster/crs", "cluster/secrets", "cluster/pods":
		return true
	}
	// istiod's own debug/mesh: the mesh config it runs with, read when the istio
	// ConfigMap is not in the report.
	parts := strings.Split(rel, "/")
	if len(parts) == 4 && parts[0] == "proxies" && parts[3] == DumpFile {
		return true // a proxy's config dump, kept beside the lab for diff --against=cluster
	}
	return len(parts) == 5 && parts[0] == "istio" && parts[3] == "debug" && parts[4] == "mesh"
}

// cleanName turns an archive entry's name into a slash path without "./" and leading
// slashes; names that climb out of the archive ("..") are returned as "".
func cleanName(name string) string {
	name = path.Clean("/" + strings.ReplaceAll(name, "\\", "/"))
	return strings.TrimPrefix(name, "/")
}

// readArchive reads what a bug report holds from src: a directory (the archive
// extracted, or istioctl's --dir output) or the .tar.gz istioctl writes (a plain tar is
// read too).
func readArchive(src string) (*files, error) {
	st, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	var entries []entry
	if st.IsDir() {
		entries, err = walkDir(src)
	} else {
		var f *os.File
		if f, err = os.Open(src); err != nil {
			return nil, err
		}
		defer f.Close()
		entries, err = readTar(f)
	}
	if err != nil {
		return nil, err
	}
	return collect(entries)
}

// entry is one file of an archive: its cleaned path and, when it may be wanted, its
// contents (read lazily through open).
type entry struct {
	name string
	open func() ([]byte, error)
	data []byte
}

// collect finds the report's root (the directory holding cluster/k8s-resources; one
// only) and keeps the wanted files under it.
func collect(entries []entry) (*files, error) {
	roots := map[string]bool{}
	for _, e := range entries {
		if e.name == marker {
			roots[""] = true
		} else if r, ok := strings.CutSuffix(e.name, "/"+marker); ok {
			roots[r] = true
		}
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("no %s in it: not what `istioctl bug-report` writes (bug-report/cluster/k8s-resources, cluster/crs, versions, proxies/, istio/)", marker)
	}
	if len(roots) > 1 {
		var rs []string
		for r := range roots {
			rs = append(rs, r+"/")
		}
		sort.Strings(rs)
		return nil, fmt.Errorf("it holds %d bug reports (%s): give one", len(rs), strings.Join(rs, ", "))
	}
	fs := &files{data: map[string][]byte{}}
	for r := range roots {
		fs.root = r
	}
	proxies, istiods := map[string]bool{}, map[string]bool{}
	dumpBytes := 0
	for _, e := range entries {
		rel := e.name
		if fs.root != "" {
			var ok bool
			if rel, ok = strings.CutPrefix(e.name, fs.root+"/"); !ok {
				continue
			}
		}
		parts := strings.Split(rel, "/")
		if len(parts) >= 4 && parts[0] == "proxies" {
			proxies[parts[1]+"/"+parts[2]] = true
		}
		if len(parts) >= 4 && parts[0] == "istio" {
			istiods[parts[1]+"/"+parts[2]] = true
		}
		if !wanted(rel) {
			continue
		}
		data := e.data
		if parts[0] == "proxies" {
			if dumpBytes > maxKeptBytes || (e.open == nil && data == nil) {
				fs.unkept = append(fs.unkept, rel)
				continue
			}
		}
		if e.open != nil {
			var err error
			if data, err = e.open(); err != nil {
				return nil, fmt.Errorf("%s: %w", rel, err)
			}
		}
		fs.data[rel] = data
		if parts[0] == "proxies" {
			dumpBytes += len(data)
		}
	}
	fs.proxies, fs.istiods = sortedKeys(proxies), sortedKeys(istiods)
	return fs, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// readLimited reads one wanted file, refusing one above the scenario file limit.
func readLimited(name string, r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, config.MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > config.MaxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB, the limit of one scenario file", name, config.MaxFileBytes>>20)
	}
	return data, nil
}

// readTar reads a gzipped (or plain) tar stream. Wanted files are read as they pass;
// the others are skipped, counted toward MaxEntries and MaxArchiveBytes.
func readTar(r io.Reader) ([]entry, error) {
	br := bufio.NewReader(r)
	var stream io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		stream = zr
	}
	lr := &io.LimitedReader{R: stream, N: MaxArchiveBytes + 1}
	tr := tar.NewReader(lr)
	var out []entry
	dumpBytes := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if lr.N <= 0 {
			return nil, fmt.Errorf("it inflates past %d GiB: not read further", MaxArchiveBytes>>30)
		}
		if err != nil {
			return nil, fmt.Errorf("tar: %w", err)
		}
		if len(out) >= MaxEntries {
			return nil, fmt.Errorf("it holds more than %d files", MaxEntries)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := cleanName(h.Name)
		e := entry{name: name}
		dump := path.Base(name) == DumpFile
		if dump && dumpBytes > maxKeptBytes {
			out = append(out, e) // listed, not read: the dumps kept are bounded
			continue
		}
		if mayBeWanted(name) {
			if e.data, err = readLimited(name, tr); err != nil {
				return nil, err
			}
			if dump {
				dumpBytes += len(e.data)
			}
		}
		out = append(out, e)
	}
	if lr.N <= 0 {
		return nil, fmt.Errorf("it inflates past %d GiB: not read further", MaxArchiveBytes>>30)
	}
	return out, nil
}

// mayBeWanted reports whether a file could be wanted under some root: a tar stream is
// read once, before its root is known.
func mayBeWanted(name string) bool {
	parts := strings.Split(name, "/")
	for i := range parts {
		if wanted(strings.Join(parts[i:], "/")) {
			return true
		}
	}
	return false
}

// walkDir lists a directory's regular files; wanted ones are read once the root is
// known (collect calls open).
func walkDir(dir string) ([]entry, error) {
	var out []entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if len(out) >= MaxEntries {
			return fmt.Errorf("it holds more than %d files", MaxEntries)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		out = append(out, entry{name: name, open: func() ([]byte, error) {
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			return readLimited(name, f)
		}})
		return nil
	})
	return out, err
}

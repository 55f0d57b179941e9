package lab

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/netns"
)

// A pod's emptyDir volumes: one directory of the pod's run directory per volume, which
// every container mounting the volume sees, as kubelet's emptyDir is shared by the
// pod's containers. The app's mounts are bound into its sandbox below its volume root
// (podVolumeRoot, where its other volumes' files are), the istio-proxy container's
// mounts are where the agent writes OUTPUT_CERTS (the secure-metrics sample's
// Prometheus reads the certificates its sidecar writes there).

// emptyDirRoot is the directory of a pod's emptyDir volumes, one subdirectory each.
func emptyDirRoot(podDir string) string { return filepath.Join(podDir, "emptydir") }

// emptyDirPath is the directory of the pod's emptyDir volume name.
func emptyDirPath(podDir, name string) string {
	return filepath.Join(emptyDirRoot(podDir), filepath.Clean("/"+name))
}

// makeEmptyDirs makes the directories of the emptyDir volumes the pod's app or sidecar
// mounts, mode 0777 as kubelet makes them: each container writes there as its own user.
func makeEmptyDirs(podDir string, p *model.Pod) error {
	for _, m := range append(append([]model.EmptyDir(nil), p.App.EmptyDirs...), p.Sidecar.EmptyDirs...) {
		d := emptyDirPath(podDir, m.Volume)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("emptyDir volume %s: %w", m.Volume, err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			return fmt.Errorf("emptyDir volume %s: %w", m.Volume, err)
		}
	}
	return nil
}

// bindEmptyDirs binds the app's emptyDir mounts into sb, read-write, each at its mount
// path below root (the app's volume root), after root's own bind: the target is made
// in root first. The directories of the app's other volume files below an emptyDir's
// mount (grafana.yaml's dashboards under its /var/lib/grafana storage) are bound again
// over it, as kubelet mounts a nested volume on a mount point it makes in the outer one.
func bindEmptyDirs(sb *netns.Sandbox, podDir, root string, mounts []model.EmptyDir, files []model.File) error {
	mounts = slices.Clone(mounts)
	slices.SortStableFunc(mounts, func(a, b model.EmptyDir) int { return strings.Compare(a.Path, b.Path) })
	for _, m := range mounts {
		dst := filepath.Join(root, filepath.Clean("/"+m.Path))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("emptyDir volume %s at %s: %w", m.Volume, m.Path, err)
		}
		src := emptyDirPath(podDir, m.Volume)
		sb.Binds = append(sb.Binds, netns.Bind{Src: src, Dst: dst, Writable: true})
		var nested []string
		for _, f := range files {
			d := path.Dir(f.Path)
			if rel, ok := underDir(d, m.Path); ok && rel != "." && !slices.Contains(nested, d) {
				nested = append(nested, d)
			}
		}
		slices.Sort(nested)
		for _, d := range nested {
			rel, _ := underDir(d, m.Path)
			if err := os.MkdirAll(filepath.Join(src, rel), 0o755); err != nil { // the mount point, in the emptyDir
				return fmt.Errorf("emptyDir volume %s: mount point %s: %w", m.Volume, d, err)
			}
			at := filepath.Join(root, filepath.Clean("/"+d))
			sb.Binds = append(sb.Binds, netns.Bind{Src: at, Dst: at})
		}
	}
	return nil
}

// outputCertsDir is where the agent of pod p writes OUTPUT_CERTS: in the emptyDir the
// istio-proxy container mounts over that directory, else in the container's own files
// (below proxyVolumeRoot, which no other container sees); "" when the pod asks for none.
func outputCertsDir(podDir string, p *model.Pod) string {
	d := p.Sidecar.OutputCerts
	if d == "" {
		return ""
	}
	for _, m := range p.Sidecar.EmptyDirs {
		if rel, ok := underDir(d, m.Path); ok {
			return filepath.Join(emptyDirPath(podDir, m.Volume), rel)
		}
	}
	return filepath.Join(proxyVolumeRoot(podDir), filepath.Clean("/"+d))
}

// underDir reports whether path p is dir or lies below it, and p relative to dir.
func underDir(p, dir string) (string, bool) {
	p, dir = path.Clean(p), path.Clean(dir)
	if p == dir {
		return ".", true
	}
	rel, ok := strings.CutPrefix(p, strings.TrimSuffix(dir, "/")+"/")
	return rel, ok
}

// proxyMounts are the directories of pod p's istio-proxy container that `meshlab exec -c
// istio-proxy` shows at their container paths: its emptyDir mounts, and its OUTPUT_CERTS
// directory when no emptyDir holds it (made by the agent in the container's own files).
func proxyMounts(podDir string, p *model.Pod) []netns.Bind {
	if !p.Sidecar.Inject {
		return nil
	}
	var out []netns.Bind
	for _, m := range p.Sidecar.EmptyDirs {
		out = append(out, netns.Bind{Src: emptyDirPath(podDir, m.Volume), Dst: m.Path, Writable: true})
	}
	if d := p.Sidecar.OutputCerts; d != "" && !slices.ContainsFunc(p.Sidecar.EmptyDirs, func(m model.EmptyDir) bool { _, ok := underDir(d, m.Path); return ok }) {
		out = append(out, netns.Bind{Src: outputCertsDir(podDir, p), Dst: d, Writable: true})
	}
	return out
}

// ProxyScratch is the directory of a pod's run directory on which `meshlab exec -c
// istio-proxy` mounts the tmpfs of its overlays (netns.ProxyView).
func ProxyScratch(podDir string) string { return filepath.Join(podDir, "proxy-exec") }

package lab

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/demoapp"
	"github.com/meshlab/meshlab/netns"
)

// App uids: every pod's app runs as a uid (and gid) of its own, so that no app can signal,
// trace or read the files of another. A lab takes a slot of appUIDSlotSize uids, one per
// pod in model order, from appUIDFirst on: 0x70000000-0x7fffffff is the range systemd
// leaves unused (neither system, regular, dynamic nor container users), so no real user
// or rootless container shares them; never 0 nor the proxy's 1337.
const (
	appUIDFirst    = 0x70010000
	appUIDSlotSize = 1024
	appUIDSlots    = 4096
)

// allocateAppUIDs gives every pod of the lab's record that has none its app uid: the
// lowest free one of the lab's block. The block is taken the first time: the lowest slot
// no other lab under the run root records, under an exclusive lock of the run root so two
// labs coming up together cannot take the same one, and recorded in lab.json before the
// lock is released. At up, pods get the block's uids in model order; pods added while the
// lab runs (livepods.go) get the lowest uids no running pod holds.
func (l *Lab) allocateAppUIDs() error {
	if len(l.rec.Pods) > appUIDSlotSize {
		return fmt.Errorf("allocate app uids: %d pods, at most %d per lab", len(l.rec.Pods), appUIDSlotSize)
	}
	if l.rec.AppUIDBase != 0 {
		if err := l.assignAppUIDs(); err != nil {
			return err
		}
		return writeRecord(l.paths.Record(), l.rec)
	}
	root, err := os.Open(l.opts.RunRoot)
	if err != nil {
		return fmt.Errorf("allocate app uids: %w", err)
	}
	defer root.Close()
	if err := unix.Flock(int(root.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("allocate app uids: lock %s: %w", l.opts.RunRoot, err)
	}
	defer unix.Flock(int(root.Fd()), unix.LOCK_UN)

	used := map[uint32]bool{}
	labs, err := Known(l.opts.RunRoot)
	if err != nil {
		return fmt.Errorf("allocate app uids: %w", err)
	}
	for _, name := range labs {
		if name == l.opts.Name {
			continue
		}
		r, err := ReadRecord(PathsFor(l.opts.RunRoot, name))
		if err != nil {
			continue // a lab without a record has started no app
		}
		if r.AppUIDBase >= appUIDFirst { // a lab may hold its block with no pod yet
			used[(r.AppUIDBase-appUIDFirst)/appUIDSlotSize] = true
		}
		for _, p := range r.Pods {
			if p.AppUID >= appUIDFirst {
				used[(p.AppUID-appUIDFirst)/appUIDSlotSize] = true
			}
		}
	}
	slot, err := freeSlot(used)
	if err != nil {
		return err
	}
	l.rec.AppUIDBase = appUIDFirst + slot*appUIDSlotSize
	if err := l.assignAppUIDs(); err != nil {
		return err
	}
	return writeRecord(l.paths.Record(), l.rec)
}

// assignAppUIDs gives each pod record without an app uid the lowest uid of the lab's
// block that no other record holds.
func (l *Lab) assignAppUIDs() error {
	base := l.rec.AppUIDBase
	used := map[uint32]bool{}
	for _, p := range l.rec.Pods {
		if p.AppUID >= base && p.AppUID < base+appUIDSlotSize {
			used[p.AppUID-base] = true
		}
	}
	next := uint32(0)
	for i := range l.rec.Pods {
		if l.rec.Pods[i].AppUID != 0 {
			continue
		}
		for used[next] {
			next++
		}
		if next >= appUIDSlotSize {
			return fmt.Errorf("allocate app uids: %d pods, at most %d per lab", len(l.rec.Pods), appUIDSlotSize)
		}
		l.rec.Pods[i].AppUID = base + next
		used[next] = true
	}
	return nil
}

// podSlot is the pod's place in the lab's block of app uids (0 for the first), which
// also numbers its proxy's --base-id (baseID): unique among the lab's running pods. At
// up it is the pod's index in model order.
func (l *Lab) podSlot(pod string) (int, error) {
	for _, p := range l.rec.Pods {
		if p.key() == pod && p.AppUID != 0 {
			return int(p.AppUID - l.rec.AppUIDBase), nil
		}
	}
	return 0, fmt.Errorf("pod %s: no app uid allocated", pod)
}

// freeSlot is the lowest app uid slot not in used.
func freeSlot(used map[uint32]bool) (uint32, error) {
	for s := uint32(0); s < appUIDSlots; s++ {
		if !used[s] {
			return s, nil
		}
	}
	return 0, fmt.Errorf("allocate app uids: all %d slots are taken by other labs", appUIDSlots)
}

// podSandbox writes the pod's resolv.conf and hosts into its run directory and returns the
// sandbox its app runs in: its own uid, the pod's name as hostname, those two files, and
// the run root and /run/netns hidden (a sidecar's files are its agent's, not its app's).
func (l *Lab) podSandbox(slot int, p *model.Pod) (*netns.Sandbox, error) {
	uid := l.rec.AppUIDBase + uint32(slot)
	if l.rec.AppUIDBase == 0 {
		return nil, fmt.Errorf("sandbox of pod %s: no app uid allocated", p.Name)
	}
	host, err := os.ReadFile("/etc/resolv.conf")
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("sandbox of pod %s: read the host's resolv.conf: %w", p.Name, err)
	}
	dir := l.paths.PodDir(p.Key())
	resolv, hosts := filepath.Join(dir, "resolv.conf"), filepath.Join(dir, "hosts")
	if err := os.WriteFile(resolv, []byte(podResolvConf(p.Namespace, host)), 0o644); err != nil {
		return nil, fmt.Errorf("sandbox of pod %s: write %s: %w", p.Name, resolv, err)
	}
	if err := os.WriteFile(hosts, []byte(podHosts(p.Name, p.IP)), 0o644); err != nil {
		return nil, fmt.Errorf("sandbox of pod %s: write %s: %w", p.Name, hosts, err)
	}
	tmp, err := podTmp(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox of pod %s: %w", p.Name, err)
	}
	sb := &netns.Sandbox{
		UID: uid, GID: uid, Hostname: podHostname(p.Name),
		ResolvConf: resolv, Hosts: hosts, TrustBundle: l.worldTrustBundle(),
		Hide: []string{l.opts.RunRoot, netns.RunDir}, Tmp: tmp,
	}
	if len(p.App.Files) > 0 {
		root := podVolumeRoot(dir)
		if err := writeVolumeFiles(root, p.App.Files, int(uid)); err != nil {
			return nil, fmt.Errorf("sandbox of pod %s: %w", p.Name, err)
		}
		sb.Binds = append(sb.Binds, netns.Bind{Src: root, Dst: root})
	}
	if len(p.App.EmptyDirs) > 0 {
		if err := bindEmptyDirs(sb, dir, podVolumeRoot(dir), p.App.EmptyDirs, p.App.Files); err != nil { // emptydir.go
			return nil, fmt.Errorf("sandbox of pod %s: %w", p.Name, err)
		}
	}
	if p.App.Persona == demoapp.PersonaSquid {
		if err := squidLogDir(sb, dir, int(uid)); err != nil {
			return nil, fmt.Errorf("sandbox of pod %s: %w", p.Name, err)
		}
	}
	return sb, nil
}

// squidLogDir gives the squid persona its image's /var/log/squid: a directory of the
// pod's, the app's to write, bound there over an empty /var/log (a container sees its
// image's /var/log, not the host's), where `meshlab exec ... -- tail
// /var/log/squid/access.log` reads it as the http-proxy task does.
func squidLogDir(sb *netns.Sandbox, podDir string, uid int) error {
	d := filepath.Join(podDir, "squid-log")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("make squid's log directory: %w", err)
	}
	if err := os.Chown(d, uid, uid); err != nil {
		return fmt.Errorf("own squid's log directory: %w", err)
	}
	sb.Hide = append(sb.Hide, filepath.Dir(demoapp.SquidLogDir))
	sb.Binds = append(sb.Binds, netns.Bind{Src: d, Dst: demoapp.SquidLogDir, Writable: true})
	return nil
}

// podTmp makes, if it is not there yet, the directory that holds what the pod writes in
// its /tmp (netns.Sandbox's Tmp, the upper layer over the host's /tmp) and returns it:
// mode 1777 as /tmp is, so the app's uid writes there and `meshlab cp` into the pod's
// /tmp lands there with that uid. It outlives an app's restart, as an emptyDir does
// (what a container keeps in /tmp is lost on its restart in Kubernetes: a departure),
// and goes with the pod's run directory when the pod is deleted.
func podTmp(podDir string) (string, error) {
	dir := filepath.Join(podDir, "tmp")
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("make the pod's /tmp %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		return "", fmt.Errorf("make the pod's /tmp %s: %w", dir, err)
	}
	return dir, nil
}

// podVolumeRoot is where a pod's volume files are written, each at its container path
// below it (the app is told this root: meshlab makes no directories in the host's
// /etc, so the files cannot sit at the container's own paths).
func podVolumeRoot(podDir string) string { return filepath.Join(podDir, "volumes") }

// writeVolumeFiles writes the files of a pod's Secret and ConfigMap volumes below root,
// afresh, readable by the app's uid only (the root directory 0500, files 0400, as
// kubelet's secret volumes are the container's alone). A path cannot leave root: it
// is cleaned as an absolute path first.
func writeVolumeFiles(root string, files []model.File, uid int) error {
	if err := os.RemoveAll(root); err != nil {
		return fmt.Errorf("clear volume files %s: %w", root, err)
	}
	var dirs []string
	for _, f := range files {
		p := filepath.Join(root, filepath.Clean("/"+f.Path))
		for d := filepath.Dir(p); d != root && strings.HasPrefix(d, root+"/") && !slices.Contains(dirs, d); d = filepath.Dir(d) {
			dirs = append(dirs, d)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("write volume file %s: %w", f.Path, err)
		}
		if err := os.WriteFile(p, f.Data, 0o400); err != nil {
			return fmt.Errorf("write volume file %s: %w", f.Path, err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			return fmt.Errorf("write volume file %s: %w", f.Path, err)
		}
	}
	for _, d := range append(dirs, root) {
		if err := os.Chown(d, uid, uid); err != nil {
			return fmt.Errorf("own volume directory %s: %w", d, err)
		}
		if err := os.Chmod(d, 0o500); err != nil {
			return fmt.Errorf("own volume directory %s: %w", d, err)
		}
	}
	return nil
}

// podResolvConf is the resolv.conf kubelet writes for a ClusterFirst pod: the search list
// of its namespace, the nameservers the pod uses (the host's: its DNS traffic is captured
// to the sidecar's or the lab's cluster DNS whatever the address), ndots:5.
func podResolvConf(namespace string, host []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "search %s.svc.%s svc.%s %s\n", namespace, model.DefaultClusterDomain, model.DefaultClusterDomain, model.DefaultClusterDomain)
	for _, line := range strings.Split(string(host), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil && a.Is4() {
				fmt.Fprintf(&b, "nameserver %s\n", a)
			}
		}
	}
	b.WriteString("options ndots:5\n")
	return b.String()
}

// podHosts is the hosts file kubelet writes: localhost, then the pod's IP and hostname.
func podHosts(pod string, ip netip.Addr) string {
	return "# Kubernetes-managed hosts file (meshlab).\n" +
		"127.0.0.1\tlocalhost\n" +
		fmt.Sprintf("%s\t%s\n", ip, podHostname(pod))
}

// podHostname is the pod's hostname: its name, cut to the 63 characters of a DNS label.
func podHostname(pod string) string {
	if len(pod) > 63 {
		return pod[:63]
	}
	return pod
}

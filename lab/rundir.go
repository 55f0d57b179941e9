package lab

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/netns"
)

// DefaultRunRoot is where every lab keeps its run directory.
const DefaultRunRoot = "/run/meshlab"

// DefaultName is the lab name used when none is given.
const DefaultName = "default"

// nodePodName is reserved: the node namespace is ml-<lab>-node.
const nodePodName = "node"

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,18}[a-z0-9])?$`) })

// ValidateName reports whether name can name a lab: lowercase letters, digits and '-',
// at most 20 characters, so that namespace names stay readable.
func ValidateName(name string) error {
	if !nameRE().MatchString(name) {
		return fmt.Errorf("invalid lab name %q: use 1-20 lowercase letters, digits or '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// Paths names every file of one lab's run directory.
type Paths struct {
	Dir string // /run/meshlab/<lab>
}

// PathsFor returns the paths of lab name under root.
func PathsFor(root, name string) Paths { return Paths{Dir: filepath.Join(root, name)} }

// Record is lab.json: the lab record.
func (p Paths) Record() string { return filepath.Join(p.Dir, "lab.json") }

// Journal is the append-only list of what the lab created.
func (p Paths) Journal() string { return filepath.Join(p.Dir, "journal") }

// XDSSocket is the discovery server's unix socket.
func (p Paths) XDSSocket() string { return filepath.Join(p.Dir, "xds.sock") }

// APISocket is the lab API's unix socket.
func (p Paths) APISocket() string { return filepath.Join(p.Dir, "api.sock") }

// PodDir is the run directory of the pod whose key (model.PodKey) is pod. A key longer
// than maxPodDirName (a long pod name in a long namespace, as Kubernetes allows) is cut
// and ends with a hash of the whole key, so that the unix sockets inside (agent.sock,
// sds.sock) stay within Linux's 108-byte sun_path with a lab name of 20 characters.
func (p Paths) PodDir(pod string) string { return filepath.Join(p.Dir, "pods", podDirName(pod)) }

// maxPodDirName is the longest pod directory name: /run/meshlab/<20>/pods/<40>/agent.sock
// is 90 bytes.
const maxPodDirName = 40

// podDirName is the name of the run directory of the pod whose key is pod: the key itself,
// or when longer than maxPodDirName its first 31 characters, '-' and 8 hex digits of its
// SHA-256, which keep two long keys with one prefix apart.
func podDirName(pod string) string {
	if len(pod) <= maxPodDirName {
		return pod
	}
	sum := sha256.Sum256([]byte(pod))
	return pod[:maxPodDirName-9] + "-" + hex.EncodeToString(sum[:4])
}

// AgentSocket is the agent API socket of one pod.
func (p Paths) AgentSocket(pod string) string { return filepath.Join(p.PodDir(pod), "agent.sock") }

// NamespaceName returns the network namespace of the pod of lab whose key is pod
// (model.PodKey): "ml-<lab>-<name>" in namespace default, "ml-<lab>-<name>.<namespace>"
// elsewhere.
func NamespaceName(lab, pod string) string { return "ml-" + lab + "-" + pod }

// NodeNamespace returns the lab's node namespace.
func NodeNamespace(lab string) string { return NamespaceName(lab, nodePodName) }

// Record is the lab's description, written to lab.json once the lab is starting.
type Record struct {
	Name        string       `json:"name"`
	PID         int          `json:"pid"`
	PIDStart    uint64       `json:"pidStart"` // start time of PID in clock ticks, against pid reuse
	Scenario    string       `json:"scenario"`
	PodCIDR     netip.Prefix `json:"podCIDR"`
	ServiceCIDR netip.Prefix `json:"serviceCIDR"`
	XDSAddr     string       `json:"xdsAddr,omitempty"` // 127.0.0.1 TCP address of the discovery server
	// ControlPlane is "istiod" when Istio's istiod generates the proxies' config (up
	// --control-plane=istiod; "" is meshlab's generator), with istiod's process and the
	// Istio version it was built from, for `version` and `status`.
	ControlPlane  string    `json:"controlPlane,omitempty"`
	IstiodPID     int       `json:"istiodPID,omitempty"`
	IstiodVersion string    `json:"istiodVersion,omitempty"`
	Created       time.Time `json:"created"`
	// CreatorUID is the user who made the lab (SUDO_UID under sudo): `clean --all` only
	// touches labs whose creator is the user running it. Absent in records of old labs.
	CreatorUID *uint32 `json:"creatorUID,omitempty"`
	// AppUIDBase is the first uid of the lab's block of app uids (see allocateAppUIDs),
	// taken when the pods first start and kept while the lab runs, for the pods that
	// apply adds; 0 until then.
	AppUIDBase uint32      `json:"appUIDBase,omitempty"`
	Pods       []PodRecord `json:"pods"`
	// Services are the lab's Services (see portforward.go).
	Services []ServiceRecord `json:"services,omitempty"`
	// ztunnel is the lab's ztunnel pod once it has started (ReadRecord finds its log):
	// FindPod knows it as kubectl knows a DaemonSet's pod. Not written: it is derived.
	ztunnel *PodRecord
}

// PodRecord is one pod in lab.json.
type PodRecord struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Key is the pod's key (model.PodKey: "<name>" in default, "<name>.<namespace>"
	// elsewhere), which names its network namespace and run directory; names may repeat
	// across namespaces, keys do not.
	Key     string     `json:"key"`
	NetNS   string     `json:"netns"`
	IP      netip.Addr `json:"ip"`
	Sidecar bool       `json:"sidecar"`
	// Workload is the Workload or Kubernetes workload (Deployment...) that made the pod.
	Workload string `json:"workload,omitempty"`
	// AppUID is the uid (and gid) the pod's app runs as, distinct from every other pod's
	// of every lab on the host (see allocateAppUIDs); 0 until the pods start.
	AppUID uint32 `json:"appUID,omitempty"`
	// Persona is the built-in app persona the pod runs ("" for the demo app or a
	// command): `meshlab exec` runs the image's own commands (fortio) by it.
	Persona string `json:"persona,omitempty"`
	// ProxyMounts are the istio-proxy container's directories a command `meshlab exec -c
	// istio-proxy` sees at their container paths: its emptyDir mounts and its
	// OUTPUT_CERTS directory (emptydir.go).
	ProxyMounts []netns.Bind `json:"proxyMounts,omitempty"`
	// Ztunnel reports whether the pod is the lab's ztunnel, whose log is ZtunnelLogFile
	// (never written to lab.json: see Record.ztunnel).
	Ztunnel bool `json:"-"`
}

// key is the pod's key, also for a record written before pods had keys.
func (p PodRecord) key() string {
	if p.Key != "" {
		return p.Key
	}
	return model.PodKey(p.Namespace, p.Name)
}

// recordWrites serializes writeRecord: a lab's goroutines write its record at once (pods
// added by an apply take their app uids while istiod's restart records its pid), and
// each write must rename a file of its own, the last one holding every change before it.
var recordWrites sync.Mutex

// writeRecord writes r to path atomically, recording the caller as its creator the first
// time (CreatorUID unset). Concurrent writes of one record are serialized, each through a
// temporary file of its own: with one shared ".tmp" name, a second writer's rename found
// the first's file gone ("rename lab.json.tmp lab.json: no such file or directory") and
// the pods whose start wrote it failed.
func writeRecord(path string, r *Record) error {
	recordWrites.Lock()
	defer recordWrites.Unlock()
	if r.CreatorUID == nil {
		uid := CallerUID()
		r.CreatorUID = &uid
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode lab record: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write lab record: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	if err := errors.Join(werr, tmp.Chmod(0o644), tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write lab record: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write lab record: %w", err)
	}
	return nil
}

// ReadRecord reads lab.json of the lab at p.
func ReadRecord(p Paths) (*Record, error) {
	b, err := os.ReadFile(p.Record())
	if err != nil {
		return nil, fmt.Errorf("read lab record: %w", err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("read lab record %s: %w", p.Record(), err)
	}
	for i, pr := range r.Pods {
		if pr.Key == "" { // a record written before pods had keys
			r.Pods[i].Key = model.PodKey(pr.Namespace, pr.Name)
		}
	}
	r.ztunnel = ztunnelRecord(p, &r) // ztunnel.go
	return &r, nil
}

// ErrNoLab is returned when no lab matches.
var ErrNoLab = errors.New("no lab is running")

// Known lists the names of labs that have a run directory under root, sorted.
func Known(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list labs: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && ValidateName(e.Name()) == nil {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Running reports whether the lab's process is alive.
func Running(p Paths) bool {
	r, err := ReadRecord(p)
	if err != nil {
		return false
	}
	return processAlive(r.PID, r.PIDStart)
}

// Resolve picks the lab a command means: the named one, else the only lab present, else
// the one named "default".
func Resolve(root, name string) (string, error) {
	if name != "" {
		return name, ValidateName(name)
	}
	names, err := Known(root)
	if err != nil {
		return "", err
	}
	switch {
	case len(names) == 1:
		return names[0], nil
	case len(names) == 0:
		return "", ErrNoLab
	}
	for _, n := range names {
		if n == DefaultName {
			return n, nil
		}
	}
	return "", fmt.Errorf("several labs are present (%v): choose one with --name", names)
}

// CallerUID is the user on whose behalf this process runs: SUDO_UID when root runs it
// through sudo, else the real uid.
func CallerUID() uint32 {
	uid := os.Getuid()
	if uid == 0 {
		if s := os.Getenv("SUDO_UID"); s != "" {
			if n, err := strconv.ParseUint(s, 10, 32); err == nil {
				return uint32(n)
			}
		}
	}
	return uint32(uid)
}

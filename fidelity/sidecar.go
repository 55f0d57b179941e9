package fidelity

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshlab/meshlab/controlplane/model"
)

// buildMeshlab builds ./cmd/meshlab with meshlab's own go.mod (not this module's, whose
// dependency versions Istio raised) into dir and returns the binary's path.
func buildMeshlab(dir string) (string, error) {
	bin := filepath.Join(dir, "meshlab")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/meshlab")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build meshlab: %w\n%s", err, out)
	}
	return bin, nil
}

// nodeID is the node id istiod matches a sidecar to its pod with.
func nodeID(p *model.Pod) string {
	return fmt.Sprintf("sidecar~%s~%s.%s~%s.svc.cluster.local", p.IP, p.Name, p.Namespace, p.Namespace)
}

// istioVersion is the version the sidecar announces (ISTIO_VERSION): the release of the
// Istio module the oracle runs (its VERSION file says 1.31), so that istiod generates
// what it generates for its own proxies.
const istioVersion = "1.31.0"

// nodeMetadata is the node metadata pilot-agent writes for a sidecar of pod p.
func nodeMetadata(p *model.Pod) map[string]any {
	labels := map[string]any{}
	for k, v := range podLabels(p) {
		labels[k] = v
	}
	return map[string]any{
		"NAMESPACE":         p.Namespace,
		"NAME":              p.Name,
		"LABELS":            labels,
		"SERVICE_ACCOUNT":   p.ServiceAccount,
		"INSTANCE_IPS":      p.IP.String(),
		"MESH_ID":           "cluster.local",
		"CLUSTER_ID":        "Kubernetes",
		"INTERCEPTION_MODE": "REDIRECT",
		"WORKLOAD_NAME":     p.Workload,
		"ISTIO_VERSION":     istioVersion,
	}
}

// bootstrap returns a meshlab-format bootstrap (as dataplane/agent writes it, without
// the agent's static listeners) whose ADS cluster xds-grpc dials the unix socket xdsSock,
// as a lab's sidecars dial theirs.
func bootstrap(p *model.Pod, xdsSock string, adminPort int) ([]byte, error) {
	return bootstrapNode(nodeID(p), p.Workload+"."+p.Namespace, nodeMetadata(p), xdsSock, adminPort)
}

// bootstrapNode is bootstrap for any node: its id, cluster and metadata.
func bootstrapNode(id, cluster string, meta map[string]any, xdsSock string, adminPort int) ([]byte, error) {
	sock := func(h, port string) map[string]any {
		return map[string]any{"socket_address": map[string]any{"address": h, "port_value": json.Number(port)}}
	}
	ads := map[string]any{"ads": map[string]any{}, "initial_fetch_timeout": "0s", "resource_api_version": "V3"}
	return json.MarshalIndent(map[string]any{
		"node": map[string]any{
			"id": id, "cluster": cluster,
			"metadata": meta, "user_agent_name": "envoy",
		},
		"admin": map[string]any{"address": sock("127.0.0.1", fmt.Sprint(adminPort))},
		"dynamic_resources": map[string]any{
			"lds_config": ads, "cds_config": ads,
			"ads_config": map[string]any{
				"api_type": "GRPC", "set_node_on_first_message_only": true, "transport_api_version": "V3",
				"grpc_services": []any{map[string]any{"envoy_grpc": map[string]any{"cluster_name": "xds-grpc"}}},
			},
		},
		"static_resources": map[string]any{"clusters": []any{
			grpcPipeCluster("xds-grpc", xdsSock),
			grpcPipeCluster("sds-grpc", sdsSocket(xdsSock)), // sds.go: pilot-agent's SDS
		}},
	}, "", "  ")
}

// grpcPipeCluster is a static HTTP/2 cluster dialling the unix socket path.
func grpcPipeCluster(name, path string) map[string]any {
	return map[string]any{
		"name": name, "type": "STATIC", "connect_timeout": "1s",
		"load_assignment": map[string]any{"cluster_name": name, "endpoints": []any{map[string]any{
			"lb_endpoints": []any{map[string]any{"endpoint": map[string]any{"address": map[string]any{"pipe": map[string]any{"path": path}}}}},
		}}},
		"typed_extension_protocol_options": map[string]any{
			"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": map[string]any{
				"@type":                "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
				"explicit_http_config": map[string]any{"http2_protocol_options": map[string]any{}},
			},
		},
	}
}

// sdsSocket is the SDS socket beside the xDS one.
func sdsSocket(xdsSock string) string { return filepath.Join(filepath.Dir(xdsSock), "sds.sock") }

// sidecar is one running `meshlab proxy`.
type sidecar struct {
	cmd       *exec.Cmd
	adminPort int
	log       *os.File
	done      chan error
	stopSDS   func()
}

// adminPort is the sidecar's admin port, on 127.0.0.1 of its own network namespace.
const adminPort = 15000

// startSidecar runs `meshlab proxy` for pod p against the ADS server on the unix socket
// xdsSock, in a network namespace of its own (unshare), so that istiod's listeners
// (0.0.0.0:15001, 15006...) bind there, never on the host; its log goes to
// dir/<ns>.<pod>.log.
func startSidecar(bin, dir string, p *model.Pod, xdsSock string) (*sidecar, error) {
	boot, err := bootstrap(p, xdsSock, adminPort)
	if err != nil {
		return nil, err
	}
	return startProxy(bin, dir, p, nodeID(p), boot, xdsSock)
}

// startProxy runs `meshlab proxy` with the bootstrap boot for pod p (whose identity its
// SDS serves to node, the node id boot announces) as startSidecar does.
func startProxy(bin, dir string, p *model.Pod, node string, boot []byte, xdsSock string) (*sidecar, error) {
	port := adminPort
	cfg := filepath.Join(dir, p.Namespace+"."+p.Name+".json")
	if err := os.WriteFile(cfg, boot, 0o600); err != nil {
		return nil, fmt.Errorf("write bootstrap: %w", err)
	}
	log, err := os.Create(filepath.Join(dir, p.Namespace+"."+p.Name+".log"))
	if err != nil {
		return nil, fmt.Errorf("create proxy log: %w", err)
	}
	stopSDS, err := startSDS(sdsSocket(xdsSock), node, p)
	if err != nil {
		log.Close()
		return nil, err
	}
	cmd := exec.Command("unshare", "--net", "--", "sh", "-c", `ip link set lo up && exec "$0" "$@"`,
		bin, "proxy", "-c", cfg, "--disable-hot-restart", "--concurrency", "1", "--log-level", "info")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		stopSDS()
		return nil, fmt.Errorf("start meshlab proxy: %w", err)
	}
	s := &sidecar{cmd: cmd, adminPort: port, log: log, done: make(chan error, 1), stopSDS: stopSDS}
	go func() { s.done <- cmd.Wait() }()
	return s, nil
}

// configDump returns the proxy's /config_dump (with EDS) as generic JSON.
func (s *sidecar) configDump(ctx context.Context) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/config_dump?include_eds", s.adminPort), nil)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialInNetns(ctx, s.cmd.Process.Pid, network, addr)
	}}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get config_dump: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read config_dump: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get config_dump: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var d map[string]any
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("decode config_dump: %w", err)
	}
	return d, nil
}

// stop ends the proxy (SIGTERM, then SIGKILL after 5s) and returns its log.
func (s *sidecar) stop() string {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.stopSDS()
	name := s.log.Name()
	s.log.Close()
	b, _ := os.ReadFile(name)
	return string(b)
}

// dialInNetns dials addr from inside the network namespace of process pid: the socket is
// made on a thread switched to that namespace, and keeps it after the thread switches back.
func dialInNetns(ctx context.Context, pid int, network, addr string) (net.Conn, error) {
	runtime.LockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("open own network namespace: %w", err)
	}
	defer self.Close()
	target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("open the proxy's network namespace: %w", err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("enter the proxy's network namespace: %w", err)
	}
	conn, dialErr := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays in the wrong namespace: keep it locked so it exits with this
		// goroutine instead of running others.
		if conn != nil {
			conn.Close()
		}
		return nil, fmt.Errorf("leave the proxy's network namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return conn, dialErr
}

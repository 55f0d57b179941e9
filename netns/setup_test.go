package netns

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

func baseNode() NodeConfig {
	return NodeConfig{
		Namespace: "ml-demo-node",
		Bridge:    "mlbr0",
		Gateway:   netip.MustParsePrefix("10.244.0.1/16"),
	}
}

func basePod() PodConfig {
	return PodConfig{
		Namespace:     "ml-demo-productpage",
		NodeNamespace: "ml-demo-node",
		Bridge:        "mlbr0",
		HostIfName:    HostIfName("demo", "productpage"),
		Address:       netip.MustParsePrefix("10.244.0.5/16"),
		Gateway:       netip.MustParseAddr("10.244.0.1"),
	}
}

func TestSetupNodePlan(t *testing.T) {
	k := &recordingKernel{}
	if err := setupNode(baseNode(), k); err != nil {
		t.Fatalf("setupNode: %v", err)
	}
	testutil.Golden(t, "node-plan", []byte(k.text()))
}

func TestSetupPodPlan(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*PodConfig)
	}{
		{name: "pod-plan-default", mutate: func(*PodConfig) {}},
		{name: "pod-plan-custom-ifname", mutate: func(c *PodConfig) { c.PodIfName = "net1" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := basePod()
			tt.mutate(&c)
			k := &recordingKernel{}
			if err := setupPod(c, k); err != nil {
				t.Fatalf("setupPod: %v", err)
			}
			testutil.Golden(t, tt.name, []byte(k.text()))
		})
	}
}

func TestSetupStopsAtFirstFailure(t *testing.T) {
	boom := errors.New("boom")
	k := &recordingKernel{failAt: 4, err: boom}
	err := setupPod(basePod(), k)
	if !errors.Is(err, boom) {
		t.Fatalf("setupPod error = %v, want it to wrap %v", err, boom)
	}
	if len(k.steps) != 4 {
		t.Fatalf("applied %d steps after a failure at step 4, want 4", len(k.steps))
	}
	if !strings.Contains(err.Error(), "type veth peer name eth0") {
		t.Errorf("error %q does not name the failing step", err)
	}
}

// TestSetupPodBatches: a kernel that batches gets a pod's steps as the runs of one
// namespace (the pod's, the node's, the pod's again), one entry each, in the same order as
// step by step, and a failure inside a run still names its step.
func TestSetupPodBatches(t *testing.T) {
	one, batched := &recordingKernel{}, &batchingKernel{}
	if err := setupPod(basePod(), one); err != nil {
		t.Fatal(err)
	}
	if err := setupPod(basePod(), batched); err != nil {
		t.Fatal(err)
	}
	if got, want := batched.text(), one.text(); got != want {
		t.Errorf("batched steps:\n%s\nwant as step by step:\n%s", got, want)
	}
	if got, want := fmt.Sprint(batched.batches), "[1 2 3 3]"; got != want {
		t.Errorf("batches %s, want %s (create; pod: IPv6 off, lo up; node: veth, master, up; pod: address, up, route)", got, want)
	}
	boom := errors.New("boom")
	k := &batchingKernel{recordingKernel: recordingKernel{failAt: 5, err: boom}}
	err := setupPod(basePod(), k)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "master mlbr0") {
		t.Errorf("setupPod error = %v, want %v naming the failing step (link set ... master mlbr0)", err, boom)
	}
	if len(k.steps) != 5 {
		t.Errorf("applied %d steps after a failure at step 5, want 5", len(k.steps))
	}
}

func TestPodConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*PodConfig)
		wantErr string // substring; empty means valid
	}{
		{name: "valid", mutate: func(*PodConfig) {}},
		{name: "missing namespace", mutate: func(c *PodConfig) { c.Namespace = "" }, wantErr: "pod namespace"},
		{name: "namespace with slash", mutate: func(c *PodConfig) { c.Namespace = "a/b" }, wantErr: "pod namespace"},
		{name: "missing node", mutate: func(c *PodConfig) { c.NodeNamespace = "" }, wantErr: "node namespace"},
		{name: "pod is node", mutate: func(c *PodConfig) { c.Namespace = c.NodeNamespace }, wantErr: "must differ"},
		{name: "missing bridge", mutate: func(c *PodConfig) { c.Bridge = "" }, wantErr: "bridge: required"},
		{name: "host if too long", mutate: func(c *PodConfig) { c.HostIfName = "vm0123456789abcdef" }, wantErr: "longer than 15"},
		{name: "pod if with space", mutate: func(c *PodConfig) { c.PodIfName = "eth 0" }, wantErr: "pod interface"},
		{name: "missing address", mutate: func(c *PodConfig) { c.Address = netip.Prefix{} }, wantErr: "address: required"},
		{name: "missing gateway", mutate: func(c *PodConfig) { c.Gateway = netip.Addr{} }, wantErr: "gateway: required"},
		{name: "gateway off subnet", mutate: func(c *PodConfig) { c.Gateway = netip.MustParseAddr("10.0.0.1") }, wantErr: "not inside"},
		{name: "address is gateway", mutate: func(c *PodConfig) { c.Address = netip.MustParsePrefix("10.244.0.1/16") }, wantErr: "equals the gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := basePod()
			tt.mutate(&c)
			if !testutil.CheckErr(t, "Validate()", c.Validate(), tt.wantErr) {
				return
			}
			k := &recordingKernel{}
			if setupPod(c, k) == nil || len(k.steps) != 0 {
				t.Fatalf("setupPod with an invalid config applied %d steps, want an error and none", len(k.steps))
			}
		})
	}
}

func TestNodeConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*NodeConfig)
		wantErr string
	}{
		{name: "valid", mutate: func(*NodeConfig) {}},
		{name: "missing namespace", mutate: func(c *NodeConfig) { c.Namespace = "" }, wantErr: "node namespace"},
		{name: "missing bridge", mutate: func(c *NodeConfig) { c.Bridge = "" }, wantErr: "bridge"},
		{name: "missing gateway", mutate: func(c *NodeConfig) { c.Gateway = netip.Prefix{} }, wantErr: "gateway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := baseNode()
			tt.mutate(&c)
			if !testutil.CheckErr(t, "Validate()", c.Validate(), tt.wantErr) {
				return
			}
		})
	}
}

func TestHostIfName(t *testing.T) {
	a := HostIfName("demo", "productpage")
	if a != HostIfName("demo", "productpage") {
		t.Fatal("HostIfName is not deterministic")
	}
	if len(a) != 10 || !strings.HasPrefix(a, "vm") || checkIfName(a) != nil {
		t.Fatalf("HostIfName = %q, want vm + 8 hex characters", a)
	}
	seen := map[string]string{a: "demo/productpage"}
	for _, p := range [][2]string{{"demo", "reviews"}, {"demo2", "productpage"}, {"de", "moproductpage"}} {
		n := HostIfName(p[0], p[1])
		if prev, ok := seen[n]; ok {
			t.Fatalf("HostIfName(%q, %q) = %q collides with %s", p[0], p[1], n, prev)
		}
		seen[n] = p[0] + "/" + p[1]
	}
}

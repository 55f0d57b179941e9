package netns

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

func baseWorld() WorldConfig {
	return WorldConfig{
		Namespace:     "ml-demo-world",
		NodeNamespace: "ml-demo-node",
		NodeIfName:    "mlworld0",
		NodeAddress:   netip.MustParsePrefix("172.31.255.1/24"),
		Addresses:     []netip.Addr{netip.MustParseAddr("172.31.255.10"), netip.MustParseAddr("172.31.255.11")},
		PodCIDR:       netip.MustParsePrefix("10.244.0.0/16"),
		ServiceCIDR:   netip.MustParsePrefix("10.96.0.0/16"),
	}
}

// The world's plan: its own namespace, one veth from the node, a route back to the pods
// and never a default route.
func TestSetupWorldPlan(t *testing.T) {
	t.Parallel()
	k := &recordingKernel{}
	if err := setupWorld(baseWorld(), k); err != nil {
		t.Fatalf("setupWorld: %v", err)
	}
	text := k.text()
	if strings.Contains(text, "route replace default") {
		t.Errorf("world plan has a default route:\n%s", text)
	}
	testutil.Golden(t, "world-plan", []byte(text))
}

func TestWorldConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(*WorldConfig)
		want   string
	}{
		{"overlaps pods", func(c *WorldConfig) { c.PodCIDR = netip.MustParsePrefix("172.31.0.0/16") }, "overlaps the pod CIDR"},
		{"overlaps services", func(c *WorldConfig) { c.ServiceCIDR = netip.MustParsePrefix("172.31.0.0/16") }, "overlaps the service CIDR"},
		{"address outside", func(c *WorldConfig) { c.Addresses = []netip.Addr{netip.MustParseAddr("10.0.0.1")} }, "not a host of the world subnet"},
		{"node's own address", func(c *WorldConfig) { c.Addresses = []netip.Addr{c.NodeAddress.Addr()} }, "not a host of the world subnet"},
		{"no addresses", func(c *WorldConfig) { c.Addresses = nil }, "at least one"},
		{"long interface", func(c *WorldConfig) { c.NodeIfName = "a-very-long-interface" }, "node interface"},
	} {
		c := baseWorld()
		tc.mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if err := baseWorld().Validate(); err != nil {
		t.Errorf("base world: %v", err)
	}
}

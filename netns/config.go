package netns

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
)

// maxIfName is the longest interface name Linux accepts (IFNAMSIZ - 1).
const maxIfName = 15

// DefaultPodIfName is the pod's interface name when PodConfig.PodIfName is empty.
const DefaultPodIfName = "eth0"

// NodeConfig describes the node namespace that holds the bridge every pod attaches to.
type NodeConfig struct {
	Namespace string       // required, e.g. "ml-demo-node"; created if absent
	Bridge    string       // required, "mlbr0"
	Gateway   netip.Prefix // required, address of the bridge, e.g. 10.244.0.1/16
}

// Validate reports what is missing or malformed in c.
func (c NodeConfig) Validate() error {
	var errs []error
	if err := checkName(c.Namespace); err != nil {
		errs = append(errs, fmt.Errorf("node namespace: %w", err))
	}
	if err := checkIfName(c.Bridge); err != nil {
		errs = append(errs, fmt.Errorf("bridge: %w", err))
	}
	if !c.Gateway.IsValid() {
		errs = append(errs, errors.New("gateway: required"))
	}
	return errors.Join(errs...)
}

// PodConfig describes one pod namespace joined to the node's bridge by a veth pair.
type PodConfig struct {
	Namespace     string       // required, pod namespace, created if absent
	NodeNamespace string       // required
	Bridge        string       // required
	HostIfName    string       // required: veth end in the node namespace, <= 15 chars (e.g. "vm"+8 hex)
	PodIfName     string       // optional, default "eth0"
	Address       netip.Prefix // required, e.g. 10.244.0.5/16
	Gateway       netip.Addr   // required, default route via it
	// AllowLowPorts lets every uid in the namespace bind any port, as container runtimes
	// set net.ipv4.ip_unprivileged_port_start=0 for a Kubernetes pod.
	AllowLowPorts bool
}

// podIfName returns the pod interface name with its default applied.
func (c PodConfig) podIfName() string {
	if c.PodIfName == "" {
		return DefaultPodIfName
	}
	return c.PodIfName
}

// Validate reports what is missing or malformed in c.
func (c PodConfig) Validate() error {
	var errs []error
	if err := checkName(c.Namespace); err != nil {
		errs = append(errs, fmt.Errorf("pod namespace: %w", err))
	}
	if err := checkName(c.NodeNamespace); err != nil {
		errs = append(errs, fmt.Errorf("node namespace: %w", err))
	}
	if c.Namespace != "" && c.Namespace == c.NodeNamespace {
		errs = append(errs, fmt.Errorf("pod namespace %q: must differ from the node namespace", c.Namespace))
	}
	if err := checkIfName(c.Bridge); err != nil {
		errs = append(errs, fmt.Errorf("bridge: %w", err))
	}
	if err := checkIfName(c.HostIfName); err != nil {
		errs = append(errs, fmt.Errorf("host interface: %w", err))
	}
	if err := checkIfName(c.podIfName()); err != nil {
		errs = append(errs, fmt.Errorf("pod interface: %w", err))
	}
	switch {
	case !c.Address.IsValid():
		errs = append(errs, errors.New("address: required"))
	case !c.Gateway.IsValid():
		errs = append(errs, errors.New("gateway: required"))
	case !c.Address.Masked().Contains(c.Gateway):
		errs = append(errs, fmt.Errorf("gateway %s: not inside the pod subnet %s", c.Gateway, c.Address.Masked()))
	case c.Address.Addr() == c.Gateway:
		errs = append(errs, fmt.Errorf("address %s: equals the gateway", c.Address))
	}
	return errors.Join(errs...)
}

// checkIfName rejects names the kernel would refuse for a link.
func checkIfName(name string) error {
	switch {
	case name == "":
		return errors.New("required")
	case len(name) > maxIfName:
		return fmt.Errorf("name %q longer than %d characters", name, maxIfName)
	case name == "." || name == "..":
		return fmt.Errorf("invalid name %q", name)
	}
	for _, r := range name {
		if r == '/' || r == ':' || r <= ' ' || r > '~' {
			return fmt.Errorf("name %q has character %q", name, r)
		}
	}
	return nil
}

// HostIfName returns a deterministic veth name for a pod: "vm" + 8 hex chars of a hash of (lab, pod).
func HostIfName(lab, pod string) string {
	sum := sha256.Sum256([]byte(lab + "\x00" + pod))
	return "vm" + hex.EncodeToString(sum[:4])
}

package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/netns"
)

// ServiceRecord is a Service in lab.json, for `meshlab port-forward svc/NAME`: its
// ports and the pods it selects (lab.json keeps no labels).
type ServiceRecord struct {
	Name      string              `json:"name"`
	Namespace string              `json:"namespace"`
	Ports     []ServicePortRecord `json:"ports"`
	Pods      []string            `json:"pods,omitempty"` // keys (model.PodKey)
}

// ServicePortRecord is one port of a ServiceRecord.
type ServicePortRecord struct {
	Name       string `json:"name,omitempty"`
	Port       uint16 `json:"port"`
	TargetPort uint16 `json:"targetPort"`
}

// serviceRecords returns the lab.json form of m's services.
func serviceRecords(m *model.Model) []ServiceRecord {
	out := make([]ServiceRecord, 0, len(m.Services))
	for _, s := range m.Services {
		r := ServiceRecord{Name: s.Name, Namespace: s.Namespace}
		for _, p := range s.Ports {
			r.Ports = append(r.Ports, ServicePortRecord{Name: p.Name, Port: p.Port, TargetPort: p.TargetPort})
		}
		for _, p := range m.Pods {
			if p.Namespace == s.Namespace && s.Selects(p.Labels) {
				r.Pods = append(r.Pods, p.Key())
			}
		}
		out = append(out, r)
	}
	return out
}

// PortMapping is one LOCAL:REMOTE pair of `port-forward`; Local 0 picks a free port.
type PortMapping struct {
	Local, Remote uint16
}

// ParsePortMapping reads kubectl's port forms: "8080:80", "80" (the same port locally)
// and ":80" (any free local port).
func ParsePortMapping(s string) (PortMapping, error) {
	local, remote, pair := strings.Cut(s, ":")
	if !pair {
		local, remote = s, s
	}
	r, err := strconv.ParseUint(remote, 10, 16)
	if err != nil || r == 0 {
		return PortMapping{}, fmt.Errorf("port %q: remote port %q is not a port number (1-65535)", s, remote)
	}
	var l uint64
	if local != "" {
		if l, err = strconv.ParseUint(local, 10, 16); err != nil {
			return PortMapping{}, fmt.Errorf("port %q: local port %q is not a port number (0-65535)", s, local)
		}
	}
	return PortMapping{Local: uint16(l), Remote: uint16(r)}, nil
}

// PortForwardConfig says what `meshlab port-forward` forwards.
type PortForwardConfig struct {
	Record    *Record // required: the lab's record
	Namespace string  // "" means default
	// Target is kubectl's reference: "svc/NAME" (or service/services), "pod/NAME",
	// "NAME", or a workload "deploy/NAME" and its kin.
	Target  string        // required
	Ports   []PortMapping // required
	Address netip.Addr    // loopback only; the zero value means 127.0.0.1
	Out     io.Writer     // progress lines, as kubectl's; nil discards them
}

// portTarget is where one local port's connections go inside the lab.
type portTarget struct {
	m    PortMapping
	addr netip.AddrPort
}

// resolve finds the pod and port each mapping reaches, as kubectl port-forward: a
// Service's port is its target port on the first pod (by name) it selects.
func (c PortForwardConfig) resolve() (string, []portTarget, error) {
	ns := c.Namespace
	if ns == "" {
		ns = "default"
	}
	kind, name, typed := strings.Cut(c.Target, "/")
	if typed && slices.Contains([]string{"svc", "service", "services"}, strings.ToLower(kind)) {
		i := slices.IndexFunc(c.Record.Services, func(s ServiceRecord) bool { return s.Namespace == ns && s.Name == name })
		if i < 0 {
			var valid []string
			for _, s := range c.Record.Services {
				if s.Namespace == ns {
					valid = append(valid, s.Name)
				}
			}
			return "", nil, fmt.Errorf("unknown service %q in namespace %s of lab %s (valid: %s)", name, ns, c.Record.Name, strings.Join(valid, ", "))
		}
		svc := c.Record.Services[i]
		if len(svc.Pods) == 0 {
			return "", nil, fmt.Errorf("service %s/%s selects no pod", ns, name)
		}
		pod := slices.Min(svc.Pods)
		ip, err := c.podIP(pod)
		if err != nil {
			return "", nil, err
		}
		var out []portTarget
		for _, m := range c.Ports {
			j := slices.IndexFunc(svc.Ports, func(p ServicePortRecord) bool { return p.Port == m.Remote })
			if j < 0 {
				var have []string
				for _, p := range svc.Ports {
					have = append(have, strconv.Itoa(int(p.Port)))
				}
				return "", nil, fmt.Errorf("service %s/%s has no port %d (ports: %s)", ns, name, m.Remote, strings.Join(have, ", "))
			}
			out = append(out, portTarget{m: m, addr: netip.AddrPortFrom(ip, svc.Ports[j].TargetPort)})
		}
		return pod, out, nil
	}
	p, err := c.Record.FindPod(c.Target, ns)
	if err != nil {
		return "", nil, err
	}
	var out []portTarget
	for _, m := range c.Ports {
		out = append(out, portTarget{m: m, addr: netip.AddrPortFrom(p.IP, m.Remote)})
	}
	return p.Key, out, nil
}

func (c PortForwardConfig) podIP(key string) (netip.Addr, error) {
	for _, p := range c.Record.Pods {
		if p.key() == key {
			return p.IP, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("pod %s is not in lab %s", key, c.Record.Name)
}

// PortForward listens on the loopback address for each mapping and copies every
// connection to its pod port, dialled from inside the lab's node namespace (the bridge
// every pod hangs on), until ctx ends. Nothing is routed between the host and the lab:
// the host only ever talks to this process on loopback. It prints kubectl's lines
// ("Forwarding from 127.0.0.1:8080 -> 8080", "Handling connection for 8080").
func PortForward(ctx context.Context, c PortForwardConfig) error {
	if c.Record == nil || c.Target == "" || len(c.Ports) == 0 {
		return errors.New("port-forward: a lab, a target and at least one port are required")
	}
	addr := c.Address
	if !addr.IsValid() {
		addr = netip.MustParseAddr("127.0.0.1")
	}
	if !addr.IsLoopback() {
		return fmt.Errorf("port-forward: address %s is not a loopback address (a lab is only reached from this host)", addr)
	}
	out := c.Out
	if out == nil {
		out = io.Discard
	}
	_, targets, err := c.resolve()
	if err != nil {
		return fmt.Errorf("port-forward: %w", err)
	}
	node := NodeNamespace(c.Record.Name)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	var lc net.ListenConfig
	for _, t := range targets {
		ln, err := lc.Listen(ctx, "tcp", netip.AddrPortFrom(addr, t.m.Local).String())
		if err != nil {
			return fmt.Errorf("port-forward: %w", err)
		}
		lns = append(lns, ln)
		fmt.Fprintf(out, "Forwarding from %s -> %d\n", ln.Addr(), t.addr.Port())
	}
	var mu sync.Mutex // serialises progress lines
	var wg sync.WaitGroup
	defer wg.Wait()
	errc := make(chan error, len(lns))
	for i, ln := range lns {
		t := targets[i]
		wg.Go(func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					if ctx.Err() == nil {
						errc <- fmt.Errorf("port-forward: accept on %s: %w", ln.Addr(), err)
					}
					return
				}
				mu.Lock()
				fmt.Fprintf(out, "Handling connection for %d\n", ln.Addr().(*net.TCPAddr).Port)
				mu.Unlock()
				wg.Go(func() { forward(ctx, conn, node, t.addr, out, &mu) })
			}
		})
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return err
}

// forward copies one local connection to addr, dialled in the node namespace, both ways
// until either side closes or ctx ends.
func forward(ctx context.Context, local net.Conn, node string, addr netip.AddrPort, out io.Writer, mu *sync.Mutex) {
	defer local.Close()
	remote, err := netns.DialContext(ctx, node, "tcp", addr.String())
	if err != nil {
		mu.Lock()
		fmt.Fprintf(out, "E port-forward: dial %s: %v\n", addr, err)
		mu.Unlock()
		return
	}
	defer remote.Close()
	stop := context.AfterFunc(ctx, func() { _ = local.Close(); _ = remote.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(remote, local)
	go cp(local, remote)
	<-done
	<-done
}

package ztunnelconfig

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// Writer prints tables and dumps to Out.
type Writer struct {
	Out io.Writer
	// Now is the clock for the certificates' VALID CERT column (optional: time.Now).
	Now func() time.Time
}

func (w Writer) table(padding int) *tabwriter.Writer {
	return tabwriter.NewWriter(w.Out, 0, 8, padding, ' ', 0)
}

func (w Writer) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// document prints v as istioctl does: JSON indented by four spaces, or its YAML.
func (w Writer) document(v any, f Format) error {
	out, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return fmt.Errorf("marshal: %w", err)
	}
	if f == YAML {
		if out, err = yaml.JSONToYAML(out); err != nil {
			return fmt.Errorf("to yaml: %w", err)
		}
	}
	_, err = fmt.Fprintln(w.Out, string(out))
	return err
}

// WorkloadFilter is `workloads`' filters, each case-insensitive; empty matches all.
type WorkloadFilter struct {
	Address   string // one of the workload's IPs
	Node      string
	Namespace string
	Name      string // the pod's name (a workload pod given as argument)
}

func (f WorkloadFilter) keep(w *Workload) bool {
	if f.Name != "" && !strings.EqualFold(w.Name, f.Name) {
		return false
	}
	if f.Namespace != "" && !strings.EqualFold(w.Namespace, f.Namespace) {
		return false
	}
	if f.Address != "" && !slices.ContainsFunc(w.WorkloadIPs, func(ip string) bool { return strings.EqualFold(ip, f.Address) }) {
		return false
	}
	return f.Node == "" || strings.EqualFold(w.Node, f.Node)
}

// Workloads prints `ztunnel-config workloads`: NAMESPACE POD NAME ADDRESS NODE WAYPOINT
// PROTOCOL by namespace.name then node; -o json/yaml the workloads in the dump's order.
func (w Writer) Workloads(d *Dump, f WorkloadFilter, format Format) error {
	var ws []*Workload
	for _, wl := range d.Workloads {
		if f.keep(wl) {
			ws = append(ws, wl)
		}
	}
	if format != Short {
		if ws == nil {
			ws = []*Workload{}
		}
		return w.document(ws, format)
	}
	slices.SortStableFunc(ws, func(a, b *Workload) int {
		if c := cmp.Compare(a.Namespace+"."+a.Name, b.Namespace+"."+b.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.Node, b.Node)
	})
	t := w.table(1)
	fmt.Fprintln(t, "NAMESPACE\tPOD NAME\tADDRESS\tNODE\tWAYPOINT\tPROTOCOL")
	for _, wl := range ws {
		addr := strings.Join(wl.WorkloadIPs, ",")
		if addr == "" {
			addr = wl.Hostname
		}
		fmt.Fprintf(t, "%v\t%v\t%v\t%v\t%v\t%v\n", wl.Namespace, wl.Name, addr, wl.Node, waypointName(wl.Waypoint, d.Services), wl.Protocol)
	}
	return t.Flush()
}

// waypointName is the name of the service a waypoint address names: by "ns/hostname" or
// by one of its VIPs; "None" without a waypoint, "NA" when no service matches.
func waypointName(g *GatewayAddress, services []*Service) string {
	if g == nil {
		return "None"
	}
	for _, s := range services {
		if s.Namespace+"/"+s.Hostname == g.Destination || slices.Contains(s.Addresses, g.Destination) {
			return s.Name
		}
	}
	return "NA"
}

// NamespaceFilter keeps the objects of one namespace (case-insensitive); empty keeps all.
type NamespaceFilter struct {
	Namespace string
}

func (f NamespaceFilter) keep(ns string) bool {
	return f.Namespace == "" || strings.EqualFold(ns, f.Namespace)
}

func sortedServices(d *Dump, f NamespaceFilter) []*Service {
	ss := []*Service{}
	for _, s := range d.Services {
		if f.keep(s.Namespace) {
			ss = append(ss, s)
		}
	}
	slices.SortStableFunc(ss, func(a, b *Service) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Hostname, b.Hostname))
	})
	return ss
}

// Services prints `ztunnel-config services`: NAMESPACE SERVICE NAME SERVICE VIP WAYPOINT
// ENDPOINTS (healthy/all) by namespace, name, hostname.
func (w Writer) Services(d *Dump, f NamespaceFilter, format Format) error {
	ss := sortedServices(d, f)
	if format != Short {
		return w.document(ss, format)
	}
	byUID := map[string]*Workload{}
	for _, wl := range d.Workloads {
		byUID[wl.UID] = wl
	}
	t := w.table(1)
	fmt.Fprintln(t, "NAMESPACE\tSERVICE NAME\tSERVICE VIP\tWAYPOINT\tENDPOINTS")
	for _, s := range ss {
		ips := []string{}
		for _, a := range s.Addresses {
			_, ip, _ := strings.Cut(a, "/")
			ips = append(ips, ip)
		}
		healthy := 0
		for _, ep := range s.Endpoints {
			if wl, ok := byUID[ep.WorkloadUID]; ok && wl.Status == "Healthy" {
				healthy++
			}
		}
		fmt.Fprintf(t, "%v\t%v\t%v\t%v\t%v\n", s.Namespace, s.Name, strings.Join(ips, ","), waypointName(s.Waypoint, d.Services),
			fmt.Sprintf("%d/%d", healthy, len(s.Endpoints)))
	}
	return t.Flush()
}

// Policies prints `ztunnel-config policies`: NAMESPACE POLICY NAME ACTION SCOPE by
// namespace and name.
func (w Writer) Policies(d *Dump, f NamespaceFilter, format Format) error {
	ps := []*Policy{}
	for _, p := range d.Policies {
		if f.keep(p.Namespace) {
			ps = append(ps, p)
		}
	}
	slices.SortStableFunc(ps, func(a, b *Policy) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	if format != Short {
		return w.document(ps, format)
	}
	t := w.table(1)
	fmt.Fprintln(t, "NAMESPACE\tPOLICY NAME\tACTION\tSCOPE")
	for _, p := range ps {
		fmt.Fprintf(t, "%v\t%v\t%v\t%v\n", p.Namespace, p.Name, p.Action, p.Scope)
	}
	return t.Flush()
}

// Certificates prints `ztunnel-config certificates`: one row per certificate of each
// identity (Leaf, Intermediate, Root), NA for an identity without one; serials in hex.
func (w Writer) Certificates(d *Dump, format Format) error {
	if format != Short {
		return w.document(d.Certificates, format)
	}
	t := w.table(5)
	fmt.Fprintln(t, "CERTIFICATE NAME\tTYPE\tSTATUS\tVALID CERT\tSERIAL NUMBER\tNOT AFTER\tNOT BEFORE")
	for _, c := range d.Certificates {
		state := c.State
		if strings.Contains(state, "Unavailable") {
			state = "Unavailable"
		}
		if len(c.CertChain) == 0 {
			fmt.Fprintf(t, "%v\t%v\t%v\t%v\t%v\t%v\t%v\n", c.Identity, "NA", state, false, "NA", "NA", "NA")
			continue
		}
		// A chain without separate roots is the older form, its last certificate the root.
		legacy := len(c.RootCert) == 0
		row := func(kind string, x *Cert) {
			fmt.Fprintf(t, "%v\t%v\t%v\t%v\t%v\t%v\t%v\n", c.Identity, kind, state, w.valid(x), serialHex(x.SerialNumber), orNA(x.ExpirationTime), orNA(x.ValidFrom))
		}
		for i, x := range c.CertChain {
			kind := "Intermediate"
			if i == 0 {
				kind = "Leaf"
			} else if i == len(c.CertChain)-1 && legacy {
				kind = "Root"
			}
			row(kind, x)
		}
		for _, x := range c.RootCert {
			row("Root", x)
		}
	}
	return t.Flush()
}

func orNA(s string) string {
	if s == "" {
		return "NA"
	}
	return s
}

// serialHex is a decimal serial in lower-case hex ("<nil>" when it is not a number).
func serialHex(dec string) string {
	n, ok := new(big.Int).SetString(dec, 10)
	if !ok {
		return "<nil>"
	}
	return n.Text(16)
}

// valid reports whether now is strictly inside the certificate's validity.
func (w Writer) valid(c *Cert) bool {
	if c.ExpirationTime == "" && c.ValidFrom == "" {
		return false
	}
	to, err := time.Parse(time.RFC3339, c.ExpirationTime)
	if err != nil {
		return false
	}
	from, err := time.Parse(time.RFC3339, c.ValidFrom)
	if err != nil {
		return false
	}
	now := w.now()
	return now.After(from) && now.Before(to)
}

// ConnectionsFilter is `connections`' filters.
type ConnectionsFilter struct {
	Namespace string // the pod's namespace (exact)
	Direction string // inbound or outbound; empty for both
	Raw       bool   // addresses as they are, not service or pod names
	// Workload is a pod name (case-insensitive), or "name.namespace" when Namespace is empty.
	Workload string
}

func (f ConnectionsFilter) normalized() ConnectionsFilter {
	if f.Workload != "" && f.Namespace == "" {
		if name, ns, ok := strings.Cut(f.Workload, "."); ok {
			f.Workload, f.Namespace = name, ns
		}
	}
	return f
}

func (f ConnectionsFilter) keep(s WorkloadState) bool {
	if f.Namespace != "" && f.Namespace != s.Info.Namespace {
		return false
	}
	return f.Workload == "" || strings.EqualFold(f.Workload, s.Info.Name)
}

func sortedStates(d *Dump) []WorkloadState {
	out := make([]WorkloadState, 0, len(d.WorkloadState))
	for _, s := range d.WorkloadState {
		out = append(out, s)
	}
	slices.SortStableFunc(out, func(a, b WorkloadState) int {
		return cmp.Or(cmp.Compare(a.Info.Namespace, b.Info.Namespace), cmp.Compare(a.Info.Name, b.Info.Name))
	})
	return out
}

// Connections prints `ztunnel-config connections`: WORKLOAD DIRECTION LOCAL REMOTE
// REMOTE TARGET PROTOCOL, addresses named by the service VIP or pod IP they are (unless
// Raw), pods by namespace and name.
func (w Writer) Connections(d *Dump, f ConnectionsFilter, format Format) error {
	f = f.normalized()
	states := sortedStates(d)
	if format != Short {
		kept := []WorkloadState{}
		for _, s := range states {
			if f.keep(s) {
				kept = append(kept, s)
			}
		}
		return w.document(kept, format)
	}
	names := map[string]string{}
	for _, s := range d.Services {
		ip := ""
		if len(s.Addresses) > 0 {
			_, ip, _ = strings.Cut(s.Addresses[0], "/")
		}
		if ip == "" {
			ip = "None"
		}
		names[ip] = s.Hostname
	}
	pods := map[string]string{}
	for _, wl := range d.Workloads {
		ip := ""
		if len(wl.WorkloadIPs) > 0 {
			ip = wl.WorkloadIPs[0]
		}
		if ip == "" {
			ip = "None"
		}
		pods[ip] = wl.Name + "." + wl.Namespace
	}
	lookup := func(addr string) string {
		if f.Raw {
			return addr
		}
		ip, port, _ := net.SplitHostPort(addr)
		if n, ok := names[ip]; ok {
			return net.JoinHostPort(n, port)
		}
		if n, ok := pods[ip]; ok {
			return net.JoinHostPort(n, port)
		}
		return addr
	}
	t := w.table(1)
	fmt.Fprintln(t, "WORKLOAD\tDIRECTION\tLOCAL\tREMOTE\tREMOTE TARGET\tPROTOCOL")
	for _, s := range states {
		if !f.keep(s) {
			continue
		}
		name := s.Info.Name + "." + s.Info.Namespace
		if f.Direction != "outbound" {
			for _, c := range s.Connections.Inbound {
				fmt.Fprintf(t, "%v\tInbound\t%v\t%v\t%v\t%v\n", name, lookup(c.ActualDst), lookup(c.Src), c.OriginalDst, c.Protocol)
			}
		}
		if f.Direction != "inbound" {
			for _, c := range s.Connections.Outbound {
				fmt.Fprintf(t, "%v\tOutbound\t%v\t%v\t%v\t%v\n", name, lookup(c.Src), lookup(c.ActualDst), lookup(c.OriginalDst), c.Protocol)
			}
		}
	}
	return t.Flush()
}

// All prints every table (with a "------ X INFO ------" header before each when asked), or
// the whole dump as read for -o json/yaml.
func (w Writer) All(d *Dump, withHeaders bool, format Format) error {
	if format != Short {
		out := d.Raw
		if format == YAML {
			var err error
			if out, err = yaml.JSONToYAML(out); err != nil {
				return fmt.Errorf("to yaml: %w", err)
			}
		}
		_, err := fmt.Fprintln(w.Out, string(out))
		return err
	}
	header := func(s string) {
		fmt.Fprint(w.Out, "\n")
		if withHeaders {
			fmt.Fprint(w.Out, "------ "+s+" ------\n\n")
		}
	}
	header("WORKLOAD INFO")
	if err := w.Workloads(d, WorkloadFilter{}, Short); err != nil {
		return err
	}
	header("SERVICE INFO")
	if err := w.Services(d, NamespaceFilter{}, Short); err != nil {
		return err
	}
	header("POLICY INFO")
	if err := w.Policies(d, NamespaceFilter{}, Short); err != nil {
		return err
	}
	header("SECRET INFO")
	if err := w.Certificates(d, Short); err != nil {
		return err
	}
	header("CONNECTIONS INFO")
	return w.Connections(d, ConnectionsFilter{}, Short)
}

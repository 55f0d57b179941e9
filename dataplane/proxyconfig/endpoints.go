package proxyconfig

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
)

// EndpointFilter is istioctl's endpoint filter: --address, --port, --cluster (exact,
// case-insensitive), --status (HEALTHY, UNHEALTHY, DRAINING...).
type EndpointFilter struct {
	Address string
	Port    uint32
	Cluster string
	Status  string
}

// Validate checks the filter's fields as a user typed them.
func (f EndpointFilter) Validate() error {
	if f.Status == "" {
		return nil
	}
	for _, n := range corev3.HealthStatus_name {
		if strings.EqualFold(n, f.Status) {
			return nil
		}
	}
	return fmt.Errorf("--status %q: want one of UNKNOWN, HEALTHY, UNHEALTHY, DRAINING, TIMEOUT, DEGRADED", f.Status)
}

func (f EndpointFilter) matchHost(h *adminv3.HostStatus, cluster string) bool {
	if f.Address != "" && !strings.EqualFold(hostAddress(h), f.Address) {
		return false
	}
	if f.Port != 0 && h.GetAddress().GetSocketAddress().GetPortValue() != f.Port {
		return false
	}
	if f.Cluster != "" && !strings.EqualFold(cluster, f.Cluster) {
		return false
	}
	if f.Status != "" && !strings.EqualFold(h.GetHealthStatus().GetEdsHealthStatus().String(), f.Status) {
		return false
	}
	return true
}

func hostAddress(h *adminv3.HostStatus) string {
	a := h.GetAddress()
	if sa := a.GetSocketAddress(); sa != nil {
		return sa.GetAddress()
	}
	if p := a.GetPipe(); p != nil {
		return "unix://" + p.GetPath()
	}
	if in := a.GetEnvoyInternalAddress(); in != nil && in.GetServerListenerName() != "" {
		return fmt.Sprintf("envoy://%s/%s", in.GetServerListenerName(), in.GetEndpointId())
	}
	return "unknown"
}

type hostRow struct {
	address     string
	port        int
	cluster     string
	status      corev3.HealthStatus
	failedCheck bool
}

// Endpoints prints every host of every cluster the proxy holds, as /clusters reports
// them: the EDS health status and whether outlier detection has ejected the host.
func (w Writer) Endpoints(c *Clusters, f EndpointFilter, format Format) error {
	if format != Short {
		var shown []*adminv3.ClusterStatus
		for _, cs := range c.clusters.GetClusterStatuses() {
			for _, h := range cs.GetHostStatuses() {
				if f.matchHost(h, cs.GetName()) {
					shown = append(shown, cs)
					break
				}
			}
		}
		b, err := marshalList(shown, format)
		if err != nil {
			return err
		}
		return w.println(b)
	}
	var rows []hostRow
	for _, cs := range c.clusters.GetClusterStatuses() {
		for _, h := range cs.GetHostStatuses() {
			if f.matchHost(h, cs.GetName()) {
				rows = append(rows, hostRow{
					address: hostAddress(h), port: int(h.GetAddress().GetSocketAddress().GetPortValue()), cluster: cs.GetName(),
					status: h.GetHealthStatus().GetEdsHealthStatus(), failedCheck: h.GetHealthStatus().GetFailedOutlierCheck(),
				})
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].address == rows[j].address {
			if rows[i].port == rows[j].port {
				return rows[i].cluster < rows[j].cluster
			}
			return rows[i].port < rows[j].port
		}
		return rows[i].address < rows[j].address
	})
	tw := new(tabwriter.Writer).Init(w.Out, 0, 8, 5, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tSTATUS\tOUTLIER CHECK\tCLUSTER")
	for _, r := range rows {
		ep := r.address
		if r.port != 0 {
			ep += ":" + strconv.Itoa(r.port)
		}
		outlier := "OK"
		if r.failedCheck {
			outlier = "FAILED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ep, corev3.HealthStatus_name[int32(r.status)], outlier, r.cluster)
	}
	return tw.Flush()
}

// edsSummary is the ENDPOINTS part of `all`: the config dump's EDS section (NAME,
// STATUS, LOCALITY, CLUSTER), as istioctl's configdump writer prints it.
func (w Writer) edsSummary(d *ConfigDump, f EndpointFilter) error {
	tw := new(tabwriter.Writer).Init(w.Out, 0, 8, 5, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tLOCALITY\tCLUSTER")
	dump, ok, err := section(d, &adminv3.EndpointsConfigDump{})
	if err != nil {
		return err
	}
	if ok {
		var loads []*endpointv3.ClusterLoadAssignment
		add := func(c *endpointv3.ClusterLoadAssignment) {
			n := 0
			for _, llb := range c.GetEndpoints() {
				var kept []*endpointv3.LbEndpoint
				for _, ep := range llb.GetLbEndpoints() {
					if f.matchLbEndpoint(ep, c.GetClusterName()) {
						kept = append(kept, ep)
					}
				}
				llb.LbEndpoints = kept
				n += len(kept)
			}
			if n > 0 {
				loads = append(loads, c)
			}
		}
		for _, e := range dump.GetDynamicEndpointConfigs() {
			if c, err := unpack(e.GetEndpointConfig(), &endpointv3.ClusterLoadAssignment{}); err == nil {
				add(c)
			}
		}
		for _, e := range dump.GetStaticEndpointConfigs() {
			if c, err := unpack(e.GetEndpointConfig(), &endpointv3.ClusterLoadAssignment{}); err == nil {
				add(c)
			}
		}
		sort.Slice(loads, func(i, j int) bool { return subsetKeyLess(loads[i].GetClusterName(), loads[j].GetClusterName()) })
		for _, c := range loads {
			for _, llb := range c.GetEndpoints() {
				for _, ep := range llb.GetLbEndpoints() {
					addr := strings.Join(lbEndpointAddresses(ep), ",")
					if w.withType {
						addr = "endpoint/" + addr
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", addr, ep.GetHealthStatus(), locality(llb.GetLocality()), c.GetClusterName())
				}
			}
		}
	}
	return tw.Flush()
}

func (f EndpointFilter) matchLbEndpoint(ep *endpointv3.LbEndpoint, cluster string) bool {
	if f.Address != "" {
		found := false
		for _, a := range lbEndpointAddresses(ep) {
			if strings.EqualFold(a, f.Address) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	if f.Port != 0 && ep.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue() != f.Port {
		return false
	}
	if f.Cluster != "" && !strings.EqualFold(cluster, f.Cluster) {
		return false
	}
	if f.Status != "" && !strings.EqualFold(ep.GetHealthStatus().String(), f.Status) {
		return false
	}
	return true
}

func lbEndpointAddresses(ep *endpointv3.LbEndpoint) []string {
	addrs := []*corev3.Address{ep.GetEndpoint().GetAddress()}
	for _, a := range ep.GetEndpoint().GetAdditionalAddresses() {
		addrs = append(addrs, a.GetAddress())
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		switch {
		case a.GetSocketAddress() != nil:
			out = append(out, a.GetSocketAddress().GetAddress()+":"+strconv.Itoa(int(a.GetSocketAddress().GetPortValue())))
		case a.GetPipe() != nil:
			out = append(out, a.GetPipe().GetPath())
		case a.GetEnvoyInternalAddress().GetServerListenerName() != "":
			in := a.GetEnvoyInternalAddress()
			out = append(out, fmt.Sprintf("envoy://%s/%s", in.GetServerListenerName(), in.GetEndpointId()))
		default:
			out = append(out, "unknown")
		}
	}
	return out
}

func locality(l *corev3.Locality) string {
	if l == nil {
		return ""
	}
	resp := l.GetRegion()
	if l.GetZone() == "" {
		return resp
	}
	resp += "/" + l.GetZone()
	if l.GetSubZone() == "" {
		return resp
	}
	return resp + "/" + l.GetSubZone()
}

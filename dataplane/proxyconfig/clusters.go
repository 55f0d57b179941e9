package proxyconfig

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Direction is a cluster's traffic direction as Istio names it.
type Direction string

// The directions of Istio's cluster names.
const (
	Inbound  Direction = "inbound"
	Outbound Direction = "outbound"
)

// ClusterFilter is istioctl's cluster filter: --fqdn (a substring of the name), --port,
// --subset (a substring), --direction.
type ClusterFilter struct {
	FQDN      string
	Port      int
	Subset    string
	Direction Direction
}

// Validate checks the filter's fields as a user typed them.
func (f ClusterFilter) Validate() error {
	if err := parsePort("port", f.Port); err != nil {
		return err
	}
	switch f.Direction {
	case "", Inbound, Outbound:
		return nil
	}
	return fmt.Errorf("--direction %q: want inbound or outbound", f.Direction)
}

// match is istioctl's ClusterFilter.Verify: substring tests on the cluster name.
func (f ClusterFilter) match(name string) bool {
	if f.FQDN != "" && !strings.Contains(name, f.FQDN) {
		return false
	}
	if f.Direction != "" && !strings.Contains(name, string(f.Direction)) {
		return false
	}
	if f.Subset != "" && !strings.Contains(name, f.Subset) {
		return false
	}
	if f.Port != 0 && !strings.Contains(name, fmt.Sprintf("|%d|", f.Port)) {
		return false
	}
	return true
}

// Clusters prints the dump's clusters (dynamic active, then static, sorted as istioctl
// sorts them) that match f.
func (w Writer) Clusters(d *ConfigDump, f ClusterFilter, format Format) error {
	clusters, err := sortedClusters(d)
	if err != nil {
		return err
	}
	var shown []*clusterv3.Cluster
	for _, c := range clusters {
		if f.match(c.GetName()) {
			shown = append(shown, c)
		}
	}
	if format != Short {
		b, err := marshalList(shown, format)
		if err != nil {
			return err
		}
		return w.println(b)
	}
	tw := new(tabwriter.Writer).Init(w.Out, 0, 8, 5, ' ', 0)
	if w.withType {
		fmt.Fprintln(tw, "NAME\tSERVICE FQDN\tPORT\tSUBSET\tDIRECTION\tTYPE\tDESTINATION RULE")
	} else {
		fmt.Fprintln(tw, "SERVICE FQDN\tPORT\tSUBSET\tDIRECTION\tTYPE\tDESTINATION RULE")
	}
	for _, c := range shown {
		name, typ, dr := c.GetName(), c.GetType(), describeManagement(c.GetMetadata())
		if len(strings.Split(name, "|")) > 3 {
			dir, subset, fqdn, port := parseSubsetKey(name)
			if subset == "" {
				subset = "-"
			}
			if w.withType {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", "cluster/"+name, fqdn, port, subset, dir, typ, dr)
			} else {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", fqdn, port, subset, dir, typ, dr)
			}
			continue
		}
		if w.withType && name != "" {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t%s\t%s\n", "cluster/"+name, "cluster/"+name, typ, dr)
		} else {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t%s\t%s\n", name, typ, dr)
		}
	}
	return tw.Flush()
}

// sortedClusters returns the dump's active clusters, dynamic first, in istioctl's order:
// by host, subset, port, then direction.
func sortedClusters(d *ConfigDump) ([]*clusterv3.Cluster, error) {
	dump, ok, err := section(d, &adminv3.ClustersConfigDump{})
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errNoSection(dump)
	}
	clusters, err := unpackEach([]*clusterv3.Cluster(nil), dump.GetDynamicActiveClusters(), (*adminv3.ClustersConfigDump_DynamicCluster).GetCluster, "dynamic cluster")
	if err != nil {
		return nil, err
	}
	clusters, err = unpackEach(clusters, dump.GetStaticClusters(), (*adminv3.ClustersConfigDump_StaticCluster).GetCluster, "static cluster")
	if err != nil {
		return nil, err
	}
	if len(clusters) == 0 {
		return nil, noneFound("clusters")
	}
	sort.Slice(clusters, func(i, j int) bool {
		return subsetKeyLess(clusters[i].GetName(), clusters[j].GetName())
	})
	return clusters, nil
}

// subsetKeyLess is istioctl's cluster and endpoint order (safelyParseSubsetKey).
func subsetKeyLess(a, b string) bool {
	iDir, iSubset, iName, iPort := safelyParseSubsetKey(a)
	jDir, jSubset, jName, jPort := safelyParseSubsetKey(b)
	if iName == jName {
		if iSubset == jSubset {
			if iPort == jPort {
				return iDir < jDir
			}
			return iPort < jPort
		}
		return iSubset < jSubset
	}
	return iName < jName
}

func safelyParseSubsetKey(key string) (string, string, string, int) {
	if len(strings.Split(key, "|")) > 3 {
		return parseSubsetKey(key)
	}
	return "", "", key, 0
}

// parseSubsetKey splits Istio's "direction|port|subset|host" cluster names (and the
// DNS SRV form "outbound_.port_.subset_.host"), as pilot's model.ParseSubsetKey.
func parseSubsetKey(s string) (direction, subset, hostname string, port int) {
	sep := "|"
	if strings.HasPrefix(s, "outbound_") || strings.HasPrefix(s, "inbound_") {
		sep = "_."
	}
	dir, s, ok := strings.Cut(s, sep)
	if !ok {
		return
	}
	direction = dir
	p, s, ok := strings.Cut(s, sep)
	if !ok {
		return
	}
	port, _ = strconv.Atoi(p)
	ss, s, ok := strings.Cut(s, sep)
	if !ok {
		return
	}
	subset = ss
	if strings.Contains(s, sep) {
		return
	}
	hostname = s
	return
}

// describeManagement names the Istio object that made a resource from its
// filter_metadata.istio.config ("/apis/networking.istio.io/v1/namespaces/NS/kind/NAME"
// becomes "NAME.NS"), as istioctl's DESTINATION RULE and VIRTUAL SERVICE columns.
func describeManagement(md *corev3.Metadata) string {
	if md == nil {
		return ""
	}
	istio, ok := md.GetFilterMetadata()["istio"]
	if !ok {
		return ""
	}
	config, ok := istio.GetFields()["config"]
	if !ok {
		return ""
	}
	path := config.GetStringValue()
	if !strings.HasPrefix(path, "/apis/networking.istio.io/") {
		return "<unknown>"
	}
	pieces := strings.Split(path, "/")
	if len(pieces) != 8 {
		return ""
	}
	return pieces[7] + "." + pieces[5]
}

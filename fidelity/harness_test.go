package fidelity

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestDiffResources pins the diff's shape: resources matched by name, named list
// elements by name, Anys unpacked, a one-sided submessage counted once.
func TestDiffResources(t *testing.T) {
	listener := func(cluster string, chains ...string) *listenerv3.Listener {
		l := &listenerv3.Listener{Name: "virtualInbound"}
		for _, n := range chains {
			l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{Name: n, Filters: []*listenerv3.Filter{{
				Name:       "envoy.filters.network.tcp_proxy",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, &tcpv3.TcpProxy{StatPrefix: cluster, ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: cluster}})},
			}}})
		}
		return l
	}
	istiod := map[string]map[string]proto.Message{
		listenerType: {"virtualInbound": listener("a", "x", "y")},
		clusterType: {
			"both":   &clusterv3.Cluster{Name: "both", AltStatName: "both", ConnectTimeout: durationpb.New(10)},
			"istiod": &clusterv3.Cluster{Name: "istiod"},
		},
	}
	ours := map[string]map[string]proto.Message{
		listenerType: {"virtualInbound": listener("b", "y", "z")},
		clusterType: {
			"both":    &clusterv3.Cluster{Name: "both", ConnectTimeout: durationpb.New(10), CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{Priority: corev3.RoutingPriority_HIGH}}}},
			"meshlab": &clusterv3.Cluster{Name: "meshlab"},
		},
	}
	var got []string
	for _, d := range diffResources(istiod, ours) {
		got = append(got, d.String())
	}
	want := []string{
		"LDS virtualInbound filter_chains[x] missing",
		"LDS virtualInbound filter_chains[y].filters[envoy.filters.network.tcp_proxy].typed_config.stat_prefix changed",
		"LDS virtualInbound filter_chains[y].filters[envoy.filters.network.tcp_proxy].typed_config.cluster changed",
		"LDS virtualInbound filter_chains[z] extra",
		"CDS both alt_stat_name missing",
		"CDS both circuit_breakers extra",
		"CDS istiod . missing",
		"CDS meshlab . extra",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diff:\n got %q\nwant %q", got, want)
	}
	if d := diffResources(istiod, istiod); len(d) != 0 {
		t.Errorf("a resource differs from itself: %v", d)
	}
}

// TestRefusalReason finds a resource's own part of a NACK naming several resources.
func TestRefusalReason(t *testing.T) {
	all := []string{"a", "a2", "b"}
	nacks := []string{"Error adding/updating listener(s) a: bad field x, b: unknown type y"}
	if got, want := refusalReason("a", all, "", nacks), "bad field x"; got != want {
		t.Errorf("a: %q, want %q", got, want)
	}
	if got, want := refusalReason("b", all, "", nacks), "unknown type y"; got != want {
		t.Errorf("b: %q, want %q", got, want)
	}
	if got, want := refusalReason("a2", all, "", nacks), nacks[0]; got != want {
		t.Errorf("a2 (not named): %q, want the whole NACK", got)
	}
	if got, want := refusalReason("a", all, "listener 'a': nope", nacks), "listener '<name>': nope"; got != want {
		t.Errorf("error_state: %q, want %q", got, want)
	}
	if got := refusalReason("a", all, "", nil); got != "not applied, and no NACK names it" {
		t.Errorf("no NACK: %q", got)
	}
}

// TestKnownListRatchet: new entries and gone ones are both reported; a rewrite keeps
// the reasons of entries that remain and puts new ones under untriaged.
func TestKnownListRatchet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "known", "s.txt")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("# c\n## istio-proxy extension\nrefuse LDS a: x\ndiff CDS b . missing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := readKnown(path)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{"refuse LDS a: x": true, "diff RDS r . extra": true}
	added, gone := k.compare(found)
	if !reflect.DeepEqual(added, []string{"diff RDS r . extra"}) || !reflect.DeepEqual(gone, []string{"diff CDS b . missing"}) {
		t.Errorf("compare: added %q gone %q", added, gone)
	}
	if err := writeKnown(path, "s", k, found, nil); err != nil {
		t.Fatal(err)
	}
	k2, err := readKnown(path)
	if err != nil {
		t.Fatal(err)
	}
	want := knownList{"refuse LDS a: x": "istio-proxy extension", "diff RDS r . extra": untriaged}
	if !reflect.DeepEqual(k2, want) {
		t.Errorf("rewritten list %v, want %v", k2, want)
	}
	ps := []pattern{{re: regexp.MustCompile(`^diff RDS .* extra$`), reason: "meshlab routes"}}
	if err := writeKnown(path, "s", k2, found, ps); err != nil {
		t.Fatal(err)
	}
	if k3, err := readKnown(path); err != nil || k3["diff RDS r . extra"] != "meshlab routes" || k3["refuse LDS a: x"] != "istio-proxy extension" {
		t.Errorf("an untriaged entry did not take its pattern's reason, or a reason was lost: %v %v", k3, err)
	}
	if err := os.WriteFile(path, []byte("bogus line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readKnown(path); err == nil {
		t.Error("a line that is no entry, reason or comment was read")
	}
}

// FuzzReadKnown: reading a known list never panics, and what it reads survives a
// write and a read unchanged.
func FuzzReadKnown(f *testing.F) {
	f.Add("## r\nrefuse LDS a: x\n")
	f.Add("# c\n\ndiff CDS b . missing\n## \n")
	f.Fuzz(func(t *testing.T, data string) {
		path := filepath.Join(t.TempDir(), "k.txt")
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		k, err := readKnown(path)
		if err != nil {
			return
		}
		found := map[string]bool{}
		for e := range k {
			found[e] = true
		}
		if err := writeKnown(path, "f", k, found, nil); err != nil {
			t.Fatal(err)
		}
		k2, err := readKnown(path)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if !reflect.DeepEqual(k, k2) {
			t.Errorf("round trip changed the list: %v -> %v", k, k2)
		}
	})
}

// TestReasonsFile: the checked-in reasons file parses, and every pattern in it matches
// some entry of a known list (a pattern matching nothing is stale).
func TestReasonsFile(t *testing.T) {
	patterns, err := readPatterns(reasonsPath)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "known", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	used := make([]bool, len(patterns))
	for _, f := range files {
		k, err := readKnown(f)
		if err != nil {
			t.Fatal(err)
		}
		for e := range k {
			for i, p := range patterns {
				if p.re.MatchString(e) {
					used[i] = true
					break
				}
			}
		}
	}
	for i, p := range patterns {
		if !used[i] {
			t.Errorf("%s: pattern %s matches no known entry; remove it", reasonsPath, p.re)
		}
	}
}

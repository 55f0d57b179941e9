package fieldcheck

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestCheckNamesTheFirstUnsupportedFieldWithItsPath(t *testing.T) {
	allow := Allow{
		"envoy.config.listener.v3.Listener":         {"name", "filter_chains"},
		"envoy.config.listener.v3.FilterChain":      {"filter_chain_match"},
		"envoy.config.listener.v3.FilterChainMatch": {"destination_port"},
	}
	l := &listenerv3.Listener{Name: "x", FilterChains: []*listenerv3.FilterChain{
		{FilterChainMatch: &listenerv3.FilterChainMatch{}},
		{FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{"a"}}},
	}}
	err := allow.Check(l)
	var ue *UnsupportedError
	if !errors.As(err, &ue) || ue.Path != "filter_chains[1].filter_chain_match.server_names" {
		t.Errorf("err = %v, want filter_chains[1].filter_chain_match.server_names", err)
	}
	l.FilterChains[1].FilterChainMatch.ServerNames = nil
	l.Address = &corev3.Address{}
	if err := allow.Check(l); err == nil || err.Error() != "address: field is not supported by meshlab proxy" {
		t.Errorf("err = %v", err)
	}
	if err := allow.Check(&listenerv3.Listener{Name: "ok"}); err != nil {
		t.Errorf("allowed message refused: %v", err)
	}
}

// referenceCheck is Check as first written: every field of every listed message asked
// whether it is set, paths spelled as it goes. Check must name the same field.
func referenceCheck(a Allow, m protoreflect.Message, path string) error {
	allowed, listed := a[m.Descriptor().FullName()]
	if !listed {
		return nil
	}
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		p := string(fd.Name())
		if path != "" {
			p = path + "." + p
		}
		if !slices.Contains(allowed, string(fd.Name())) {
			return &UnsupportedError{Path: p}
		}
		if fd.Kind() != protoreflect.MessageKind {
			continue
		}
		v := m.Get(fd)
		switch {
		case fd.IsList():
			for j := 0; j < v.List().Len(); j++ {
				if err := referenceCheck(a, v.List().Get(j).Message(), fmt.Sprintf("%s[%d]", p, j)); err != nil {
					return err
				}
			}
		case fd.IsMap():
			if fd.MapValue().Kind() != protoreflect.MessageKind {
				continue
			}
			var err error
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				err = referenceCheck(a, mv.Message(), fmt.Sprintf("%s[%v]", p, k.Interface()))
				return err == nil
			})
			if err != nil {
				return err
			}
		default:
			if err := referenceCheck(a, v.Message(), p); err != nil {
				return err
			}
		}
	}
	return nil
}

// setFields lists every message type reachable from m and its set fields.
func setFields(m protoreflect.Message, out Allow) {
	name := m.Descriptor().FullName()
	if _, ok := out[name]; !ok {
		out[name] = []string{}
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if !slices.Contains(out[name], string(fd.Name())) {
			out[name] = append(out[name], string(fd.Name()))
		}
		if fd.Kind() != protoreflect.MessageKind {
			return true
		}
		switch {
		case fd.IsList():
			for j := 0; j < v.List().Len(); j++ {
				setFields(v.List().Get(j).Message(), out)
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					setFields(mv.Message(), out)
					return true
				})
			}
		default:
			setFields(v.Message(), out)
		}
		return true
	})
}

// TestCheckNamesWhatTheReferenceNames refuses, two at a time, every pair of fields set
// anywhere in a cluster with lists, a one-element map, oneofs and nested messages, and
// wants the path the straightforward walk gives (the first in declaration order, depth
// first).
func TestCheckNamesWhatTheReferenceNames(t *testing.T) {
	c := &clusterv3.Cluster{
		Name:                 "outbound|8080||svc.default.svc.cluster.local",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			ServiceName: "x",
			EdsConfig:   &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
		},
		ConnectTimeout: durationpb.New(10 * time.Second),
		CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{
			{MaxConnections: wrapperspb.UInt32(1)},
			{MaxRetries: wrapperspb.UInt32(3), TrackRemaining: true},
		}},
		Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			"istio": {Fields: map[string]*structpb.Value{"default_original_port": structpb.NewNumberValue(8080)}},
		}},
		TransportSocketMatches: []*clusterv3.Cluster_TransportSocketMatch{
			{Name: "tlsMode-istio", Match: &structpb.Struct{}, TransportSocket: &corev3.TransportSocket{Name: "tls"}},
			{Name: "tlsMode-disabled", TransportSocket: &corev3.TransportSocket{Name: "raw"}},
		},
	}
	m := c.ProtoReflect()
	full := Allow{}
	setFields(m, full)
	if err := full.Check(c); err != nil {
		t.Fatalf("everything allowed: %v", err)
	}
	enc, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !full.AcceptsEncoding(m.Descriptor(), enc, "") {
		t.Fatal("everything allowed: AcceptsEncoding refused the encoding")
	}
	type field struct {
		typ  protoreflect.FullName
		name string
	}
	var all []field
	for typ, fields := range full {
		for _, f := range fields {
			all = append(all, field{typ, f})
		}
	}
	cases := 0
	for i, f1 := range all {
		for _, f2 := range all[i:] {
			a := Allow{}
			for k, v := range full {
				a[k] = slices.DeleteFunc(slices.Clone(v), func(x string) bool {
					return k == f1.typ && x == f1.name || k == f2.typ && x == f2.name
				})
			}
			want := referenceCheck(a, m, "")
			got := a.Check(c)
			if want == nil || got == nil || got.Error() != want.Error() {
				t.Errorf("%v and %v refused: got %v, want %v", f1, f2, got, want)
			}
			if a.AcceptsEncoding(m.Descriptor(), enc, "") {
				t.Errorf("%v and %v refused: AcceptsEncoding accepted the encoding", f1, f2)
			}
			cases++
		}
	}
	if cases < 200 {
		t.Errorf("only %d fields refused; the fixture lost its fields", cases)
	}
}

// TestAcceptsEncodingLeavesDefaultsToCheck: a field encoded with its default value is on
// the wire but not set; AcceptsEncoding refuses it and Check of the decoded message
// accepts it. Unknown fields are not checked, as Check does not see them.
func TestAcceptsEncodingLeavesDefaultsToCheck(t *testing.T) {
	allow := Allow{"envoy.config.listener.v3.Listener": {"name"}}
	l := &listenerv3.Listener{}
	md := l.ProtoReflect().Descriptor()
	// name "x", then per_connection_buffer_limit_bytes (5, a message) and
	// stat_prefix (28, a string) encoded empty, then unknown field 9999.
	enc := []byte{0x0a, 0x01, 'x', 0x2a, 0x00}
	if allow.AcceptsEncoding(md, enc, "") {
		t.Error("AcceptsEncoding took a message field that is not allowed")
	}
	empty := append([]byte{0x0a, 0x01, 'x'}, protowireString(28, "")...)
	if allow.AcceptsEncoding(md, empty, "") {
		t.Error("AcceptsEncoding took stat_prefix on the wire")
	}
	if err := proto.Unmarshal(empty, l); err != nil {
		t.Fatal(err)
	}
	if err := allow.Check(l); err != nil {
		t.Errorf("Check of the decoded message: %v (stat_prefix is empty: not set)", err)
	}
	unknown := append([]byte{0x0a, 0x01, 'x'}, protowireString(9999, "y")...)
	if !allow.AcceptsEncoding(md, unknown, "") {
		t.Error("AcceptsEncoding refused an unknown field")
	}
	if !allow.AcceptsEncoding(md, enc[:3], "") || !allow.AcceptsEncoding(md, enc, "per_connection_buffer_limit_bytes") {
		t.Error("AcceptsEncoding refused an allowed or skipped field")
	}
}

func protowireString(num protowire.Number, v string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), v)
}

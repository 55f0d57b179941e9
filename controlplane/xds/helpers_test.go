package xds

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// helloModel is the hello scenario with fixed addresses: frontend calls backend, which
// has two versions.
func helloModel() *model.Model {
	httpPort := []model.ServicePort{{Name: "http", Port: 8080, TargetPort: 8080, Protocol: model.ProtocolHTTP}}
	svc := func(name, vip string) *model.Service {
		return &model.Service{
			Name: name, Namespace: "default", VIP: netip.MustParseAddr(vip), Ports: httpPort,
			Selector: map[string]string{"app": name},
			Origin:   model.Origin{File: "hello.yaml", Kind: "Service", Namespace: "default", Name: name},
		}
	}
	pod := func(name, app, version, sa, ip string) *model.Pod {
		return &model.Pod{
			Name: name, Namespace: "default", Workload: name,
			Labels:         map[string]string{"app": app, "version": version},
			ServiceAccount: sa, IP: netip.MustParseAddr(ip), Ports: []uint16{8080},
			Sidecar: model.SidecarSpec{Inject: true},
			Origin:  model.Origin{File: "hello.yaml", Kind: "Workload", Namespace: "default", Name: name},
		}
	}
	return model.New(
		[]*model.Service{svc("frontend", "10.96.0.11"), svc("backend", "10.96.0.10")},
		[]*model.Pod{
			pod("frontend-v1", "frontend", "v1", "frontend", "10.244.0.2"),
			pod("backend-v1", "backend", "v1", "backend", "10.244.0.3"),
			pod("backend-v2", "backend", "v2", "backend", "10.244.0.4"),
		},
	)
}

// typeOrder is the order resource types appear in dumps, as Envoy's config_dump.
var typeOrder = []struct {
	key string
	typ resource.Type
}{
	{"listeners", resource.ListenerType},
	{"clusters", resource.ClusterType},
	{"routes", resource.RouteType},
	{"endpoints", resource.EndpointType},
}

// dumpJSON renders generated resources as indented JSON with sorted keys and proto field
// names, as Envoy's config_dump spells them. protojson's own output varies its whitespace
// on purpose, so it is decoded and re-encoded.
func dumpJSON(t *testing.T, res map[resource.Type][]types.Resource) []byte {
	t.Helper()
	doc := map[string][]json.RawMessage{}
	for _, to := range typeOrder {
		doc[to.key] = []json.RawMessage{}
		for _, r := range res[to.typ] {
			b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(r)
			if err != nil {
				t.Fatalf("marshal %T: %v", r, err)
			}
			doc[to.key] = append(doc[to.key], b)
		}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("marshal dump: %v", err)
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		t.Fatalf("decode dump: %v", err)
	}
	out, err := json.MarshalIndent(generic, "", "  ")
	if err != nil {
		t.Fatalf("indent dump: %v", err)
	}
	return append(out, '\n')
}

// validateDeep runs ValidateAll on msg and on every message packed in an Any inside it,
// at any depth, as Envoy does when it unpacks typed configs. It returns how many Any
// values it unpacked.
func validateDeep(t *testing.T, where string, msg proto.Message) int {
	t.Helper()
	if v, ok := msg.(validator); ok {
		if err := v.ValidateAll(); err != nil {
			t.Errorf("%s (%s): %v", where, msg.ProtoReflect().Descriptor().FullName(), err)
		}
	}
	unpacked := 0
	if a, ok := msg.(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			t.Errorf("%s: unpack %s: %v", where, a.GetTypeUrl(), err)
			return 0
		}
		return 1 + validateDeep(t, where+"/"+a.GetTypeUrl(), inner)
	}
	msg.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		switch {
		case fd.IsList():
			for i := 0; i < v.List().Len(); i++ {
				unpacked += validateDeep(t, where+"."+string(fd.Name()), v.List().Get(i).Message().Interface())
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					unpacked += validateDeep(t, where+"."+string(fd.Name()), mv.Message().Interface())
					return true
				})
			}
		default:
			unpacked += validateDeep(t, where+"."+string(fd.Name()), v.Message().Interface())
		}
		return true
	})
	return unpacked
}

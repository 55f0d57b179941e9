package config

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
)

// Every field of istio.io/api's schema that meshlab does not implement is refused by
// name: the test walks each kind's schema, sets every field outside the implemented set
// (inside messages meshlab does implement) on its own, and checks the refusal.
func TestEveryUnimplementedFieldIsRefused(t *testing.T) {
	t.Parallel()
	kinds := []struct {
		kind string
		msg  proto.Message
		set  map[string]bool
	}{
		{"VirtualService", &networking.VirtualService{}, virtualServiceFields()},
		{"DestinationRule", &networking.DestinationRule{}, destinationRuleFields()},
		{"ServiceEntry", &networking.ServiceEntry{}, serviceEntryFields()},
		{"MeshConfig", &meshv1alpha1.MeshConfig{}, meshConfigFields()},
		{"PeerAuthentication", &security.PeerAuthentication{}, peerAuthenticationFields()},
		{"AuthorizationPolicy", &security.AuthorizationPolicy{}, authorizationPolicyFields()},
		{"RequestAuthentication", &security.RequestAuthentication{}, requestAuthenticationFields()},
	}
	for _, k := range kinds {
		var chains [][]protoreflect.FieldDescriptor
		implemented := 0
		var visit func(md protoreflect.MessageDescriptor, norm string, chain []protoreflect.FieldDescriptor)
		visit = func(md protoreflect.MessageDescriptor, norm string, chain []protoreflect.FieldDescriptor) {
			for i := range md.Fields().Len() {
				fd := md.Fields().Get(i)
				n := joinPath(norm, fd.JSONName())
				c := append(append([]protoreflect.FieldDescriptor(nil), chain...), fd)
				if !k.set[n] {
					chains = append(chains, c)
					continue
				}
				implemented++
				switch {
				case fd.IsMap() && fd.MapValue().Kind() == protoreflect.MessageKind:
					visit(fd.MapValue().Message(), n+".*", c)
				case !fd.IsMap() && fd.Kind() == protoreflect.MessageKind && !strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf."):
					visit(fd.Message(), n, c)
				}
			}
		}
		visit(k.msg.ProtoReflect().Descriptor(), "", nil)
		if implemented != len(k.set) {
			t.Errorf("%s: %d of the %d implemented paths exist in istio.io/api's schema", k.kind, implemented, len(k.set))
		}
		for _, chain := range chains {
			root := k.msg.ProtoReflect().New()
			path := setChain(root, chain)
			var errs ErrorList
			refuseUnimplemented(root, k.set, k.kind, problems{list: &errs})
			if len(errs) != 1 || errs[0].Field != path || !strings.Contains(errs[0].Msg, "is not supported by meshlab ("+k.kind+" supports ") {
				t.Errorf("%s with only %s set: problems %v, want one refusal at %s", k.kind, path, errs, path)
			}
		}
		t.Logf("%s: %d fields implemented, %d refused", k.kind, implemented, len(chains))
	}
}

// setChain sets the last field of chain to a non-default value inside one element of each
// field before it, and returns the field's path as messages name it.
func setChain(m protoreflect.Message, chain []protoreflect.FieldDescriptor) string {
	path := "spec"
	for i, fd := range chain {
		path += "." + fd.JSONName()
		last := i == len(chain)-1
		switch {
		case fd.IsMap():
			key := scalar(fd.MapKey()).MapKey()
			path += "[" + key.String() + "]"
			mp := m.Mutable(fd).Map()
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				m = mp.Mutable(key).Message()
			} else {
				mp.Set(key, scalar(fd.MapValue()))
			}
			if last {
				return strings.TrimSuffix(path, "["+key.String()+"]")
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			if fd.Kind() == protoreflect.MessageKind {
				m = l.AppendMutable().Message()
			} else {
				l.Append(scalar(fd))
			}
			if last {
				return path
			}
			path += "[0]"
		case fd.Kind() == protoreflect.MessageKind:
			m = m.Mutable(fd).Message()
		default:
			m.Set(fd, scalar(fd))
		}
	}
	return path
}

// scalar returns a non-default value of fd's kind.
func scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(vals.Len() - 1).Number())
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("k")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("k"))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(1)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(1)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(1)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(1)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(1)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(1)
	}
	panic("unexpected kind " + fd.Kind().String())
}

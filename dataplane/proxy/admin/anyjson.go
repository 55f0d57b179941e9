package admin

import (
	"errors"
	"fmt"
	"strings"

	// Istio wraps extension configs in TypedStruct (udpa.type.v1 and xds.type.v3); Envoy
	// links both, so /config_dump renders them as JSON rather than failing.
	_ "github.com/cncf/xds/go/udpa/type/v1"
	_ "github.com/cncf/xds/go/xds/type/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// opaqueResolver resolves every message type the proxy links, and gives any other type
// name a synthetic message with one bytes field, value: an Any of a type the proxy does
// not know renders as {"@type": ..., "value": "<base64 of its bytes>"} instead of failing
// the whole dump (Envoy prints what it cannot decode rather than answering 500).
type opaqueResolver struct {
	opaque map[protoreflect.FullName]protoreflect.MessageType
}

var _ interface {
	protoregistry.MessageTypeResolver
	protoregistry.ExtensionTypeResolver
} = (*opaqueResolver)(nil)

func (r *opaqueResolver) FindMessageByName(name protoreflect.FullName) (protoreflect.MessageType, error) {
	if t, ok := r.opaque[name]; ok {
		return t, nil
	}
	return protoregistry.GlobalTypes.FindMessageByName(name)
}

func (r *opaqueResolver) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	return r.FindMessageByName(typeName(url))
}

func (r *opaqueResolver) FindExtensionByName(field protoreflect.FullName) (protoreflect.ExtensionType, error) {
	return protoregistry.GlobalTypes.FindExtensionByName(field)
}

func (r *opaqueResolver) FindExtensionByNumber(message protoreflect.FullName, field protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	return protoregistry.GlobalTypes.FindExtensionByNumber(message, field)
}

func typeName(url string) protoreflect.FullName {
	if i := strings.LastIndexByte(url, '/'); i >= 0 {
		url = url[i+1:]
	}
	return protoreflect.FullName(url)
}

// opaqueType returns the synthetic type for an unknown name.
func (r *opaqueResolver) opaqueType(name protoreflect.FullName) (protoreflect.MessageType, error) {
	if t, ok := r.opaque[name]; ok {
		return t, nil
	}
	if !name.IsValid() {
		return nil, fmt.Errorf("type name %q is not a valid message name", name)
	}
	fd := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("meshlab/opaque/" + string(name) + ".proto"),
		Package: proto.String(string(name.Parent())),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String(string(name.Name())),
			Field: []*descriptorpb.FieldDescriptorProto{{
				Name:     proto.String("value"),
				JsonName: proto.String("value"),
				Number:   proto.Int32(1),
				Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
				Type:     descriptorpb.FieldDescriptorProto_TYPE_BYTES.Enum(),
			}},
		}},
	}
	// An empty registry: the synthetic file depends on nothing and must not collide with
	// linked files.
	f, err := protodesc.NewFile(fd, new(protoregistry.Files))
	if err != nil {
		return nil, fmt.Errorf("describe opaque type %s: %w", name, err)
	}
	t := dynamicpb.NewMessageType(f.Messages().Get(0))
	if r.opaque == nil {
		r.opaque = map[protoreflect.FullName]protoreflect.MessageType{}
	}
	r.opaque[name] = t
	return t, nil
}

// withOpaqueAnys returns a copy of m in which every Any of an unknown type (at any depth,
// inside known Anys too) carries its bytes as the value field of r's synthetic type.
func (r *opaqueResolver) withOpaqueAnys(m proto.Message) (proto.Message, error) {
	c := proto.Clone(m)
	if err := r.rewrite(c.ProtoReflect()); err != nil {
		return nil, err
	}
	return c, nil
}

const anyName protoreflect.FullName = "google.protobuf.Any"

func (r *opaqueResolver) rewrite(m protoreflect.Message) error {
	if m.Descriptor().FullName() == anyName {
		return r.rewriteAny(m)
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = r.rewrite(l.Get(i).Message())
			}
		case fd.IsMap():
			if fd.MapValue().Kind() != protoreflect.MessageKind {
				return true
			}
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				err = r.rewrite(mv.Message())
				return err == nil
			})
		default:
			err = r.rewrite(v.Message())
		}
		return err == nil
	})
	return err
}

func (r *opaqueResolver) rewriteAny(m protoreflect.Message) error {
	fields := m.Descriptor().Fields()
	urlField, valueField := fields.ByName("type_url"), fields.ByName("value")
	url := m.Get(urlField).String()
	if url == "" {
		return nil
	}
	value := m.Get(valueField).Bytes()
	name := typeName(url)
	t, err := protoregistry.GlobalTypes.FindMessageByName(name)
	if errors.Is(err, protoregistry.NotFound) {
		if _, err := r.opaqueType(name); err != nil {
			return err
		}
		m.Set(valueField, protoreflect.ValueOfBytes(protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), value)))
		return nil
	}
	if err != nil {
		return fmt.Errorf("resolve %s: %w", url, err)
	}
	inner := t.New()
	if err := (proto.UnmarshalOptions{}).Unmarshal(value, inner.Interface()); err != nil {
		return fmt.Errorf("unpack %s: %w", url, err)
	}
	if err := r.rewrite(inner); err != nil {
		return err
	}
	// The inner message is re-encoded only to carry rewritten Anys: the JSON shows fields,
	// never bytes, so field order does not matter.
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner.Interface())
	if err != nil {
		return fmt.Errorf("pack %s: %w", url, err)
	}
	m.Set(valueField, protoreflect.ValueOfBytes(b))
	return nil
}

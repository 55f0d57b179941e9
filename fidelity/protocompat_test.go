package fidelity

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/emptypb"
	istioworkload "istio.io/istio/pkg/workloadapi"
	istiosecurity "istio.io/istio/pkg/workloadapi/security"
	istiozds "istio.io/istio/pkg/zdsapi"

	"github.com/meshlab/meshlab/ambientapi/security"
	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/ambientapi/zds"
)

// TestAmbientProtosMatchIstio holds meshlab's ambient wire schemas (ambientapi) to
// Istio's own (pkg/workloadapi, pkg/workloadapi/security, pkg/zdsapi): the same messages
// and enums, each field with the same number, name, type and cardinality, each enum value
// with the same number and name. Either side of a WDS or ZDS connection can then be the
// real one.
func TestAmbientProtosMatchIstio(t *testing.T) {
	for _, c := range []struct {
		name        string
		istio, ours protoreflect.FileDescriptor
	}{
		{"workload", (&istioworkload.Address{}).ProtoReflect().Descriptor().ParentFile(), (&workload.Address{}).ProtoReflect().Descriptor().ParentFile()},
		{"security", (&istiosecurity.Authorization{}).ProtoReflect().Descriptor().ParentFile(), (&security.Authorization{}).ProtoReflect().Descriptor().ParentFile()},
		{"zds", (&istiozds.WorkloadRequest{}).ProtoReflect().Descriptor().ParentFile(), (&zds.WorkloadRequest{}).ProtoReflect().Descriptor().ParentFile()},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := len(declarations(c.istio))
			if n == 0 {
				t.Fatalf("Istio's %s declares nothing", c.istio.Path())
			}
			if d := schemaDiffs(c.istio, c.ours); len(d) > 0 {
				t.Errorf("%s (package %s) differs from Istio's %s:\n  %s", c.ours.Path(), c.ours.Package(), c.istio.Path(), strings.Join(d, "\n  "))
			}
			t.Logf("%s: %d messages and enums, as Istio's %s", c.ours.Path(), n, c.istio.Path())
		})
	}
}

// TestSchemaDiffsFindsEachKind: the check sees a renumbered field, a changed type, a
// missing field, a missing message and a renamed enum value.
func TestSchemaDiffsFindsEachKind(t *testing.T) {
	file := func(mut func(*descriptorpb.FileDescriptorProto)) protoreflect.FileDescriptor {
		t.Helper()
		fd := protodesc.ToFileDescriptorProto((&istiosecurity.Authorization{}).ProtoReflect().Descriptor().ParentFile())
		mut(fd)
		f, err := protodesc.NewFile(fd, importsOfAuthorization(t))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	istio := file(func(*descriptorpb.FileDescriptorProto) {})
	if d := schemaDiffs(istio, istio); len(d) != 0 {
		t.Fatalf("a schema differs from itself: %v", d)
	}
	find := func(fd *descriptorpb.FileDescriptorProto, msg string) *descriptorpb.DescriptorProto {
		for _, m := range fd.MessageType {
			if m.GetName() == msg {
				return m
			}
		}
		t.Fatalf("no message %s", msg)
		return nil
	}
	ours := file(func(fd *descriptorpb.FileDescriptorProto) {
		a := find(fd, "Authorization")
		for _, f := range a.Field {
			switch f.GetName() {
			case "name":
				f.Number = new(int32(99))
			case "dry_run":
				f.Type = descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
			}
		}
		m := find(fd, "Match")
		m.Field = m.Field[1:]
		for i, msg := range fd.MessageType {
			if msg.GetName() == "StringMatch" {
				fd.MessageType = append(fd.MessageType[:i:i], fd.MessageType[i+1:]...)
				break
			}
		}
		for _, f := range find(fd, "Match").Field {
			if f.GetTypeName() == ".istio.security.StringMatch" {
				f.Type, f.TypeName = descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), nil
			}
		}
		fd.EnumType[0].Value[0].Name = new("RENAMED")
	})
	got := strings.Join(schemaDiffs(istio, ours), "\n")
	for _, want := range []string{
		"istio.security.Authorization field 1 (name): only in Istio's",
		"istio.security.Authorization field 99 (name): only in meshlab's",
		"istio.security.Authorization field 6: Istio's dry_run optional bool, meshlab's dry_run optional string",
		"istio.security.Match field 1 (namespaces): only in Istio's",
		"istio.security.StringMatch: only in Istio's",
		"value 0: Istio's",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the check missed %q; it found:\n%s", want, got)
		}
	}
}

// importsOfAuthorization resolves the imports of Istio's authorization.proto.
func importsOfAuthorization(t *testing.T) *protoregistry.Files {
	t.Helper()
	files := new(protoregistry.Files)
	for _, f := range []protoreflect.FileDescriptor{
		(&istioworkload.Address{}).ProtoReflect().Descriptor().ParentFile(),
		(&emptypb.Empty{}).ProtoReflect().Descriptor().ParentFile(),
	} {
		if err := files.RegisterFile(f); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

package admin

import (
	"fmt"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// selectResource implements /config_dump?resource=<field>: every element of the named
// repeated field of every dump, each as its own Any, as Envoy does.
func selectResource(dump *adminv3.ConfigDump, field string) (*adminv3.ConfigDump, error) {
	out := &adminv3.ConfigDump{}
	found := false
	for _, a := range dump.GetConfigs() {
		m, err := a.UnmarshalNew()
		if err != nil {
			return nil, fmt.Errorf("unpack %s: %w", a.GetTypeUrl(), err)
		}
		fd := m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(field))
		if fd == nil || !fd.IsList() || fd.Kind() != protoreflect.MessageKind {
			continue
		}
		found = true
		list := m.ProtoReflect().Get(fd).List()
		for i := 0; i < list.Len(); i++ {
			item, err := anypb.New(proto.Clone(list.Get(i).Message().Interface()))
			if err != nil {
				return nil, fmt.Errorf("pack %s: %w", field, err)
			}
			out.Configs = append(out.Configs, item)
		}
	}
	if !found {
		return nil, fmt.Errorf("%s not found in config dump", field)
	}
	return out, nil
}

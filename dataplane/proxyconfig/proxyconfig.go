// Package proxyconfig renders `istioctl proxy-config`'s tables and dumps from what a
// proxy's admin API serves: /config_dump (clusters, listeners, routes, secrets,
// bootstrap, all) and /clusters?format=json (endpoints, with health and outlier state).
//
// Columns, row sets, order, filters and spacing follow istioctl's own writers
// (istio.io/istio istioctl/pkg/writer/envoy/{configdump,clusters} and
// istioctl/pkg/writer/compare/sds), so that what a learner reads here is what istioctl
// prints for the same dump; fidelity/istioctl_test.go feeds the same dumps to both.
// Like the proxy, this package knows only Envoy's admin API, never the control plane.
package proxyconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	// The resource types the tables decode, registered for Any resolution.
	_ "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"
)

// Format is an -o value: istioctl's short table, or the resources as JSON or YAML.
type Format string

// The formats istioctl proxy-config takes.
const (
	Short Format = "short"
	JSON  Format = "json"
	YAML  Format = "yaml"
)

// ParseFormat validates an -o value ("" is the table, as istioctl's default "short").
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case "", Short:
		return Short, nil
	case JSON, YAML:
		return Format(s), nil
	}
	return "", fmt.Errorf("-o %q: want short, json or yaml", s)
}

// Writer prints tables and dumps to Out.
type Writer struct {
	Out io.Writer // required
	// Now is the clock VALID CERT is judged by; optional, time.Now when nil.
	Now func() time.Time
	// withType prefixes names with their type ("cluster/", "listener/"...) and adds
	// the NAME columns, as istioctl's `all` summary does.
	withType bool
}

func (w Writer) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// ConfigDump is a parsed /config_dump.
type ConfigDump struct {
	raw  []byte
	dump *adminv3.ConfigDump
}

// ParseConfigDump parses a proxy's /config_dump JSON. Typed configs of types this
// binary does not know (Istio's filters, newer Envoy extensions) are kept as their
// type URL only, as istioctl does, instead of failing the whole dump.
func ParseConfigDump(b []byte) (*ConfigDump, error) {
	var d adminv3.ConfigDump
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true, Resolver: lenient{}}).Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("decode config_dump: %w", err)
	}
	return &ConfigDump{raw: b, dump: &d}, nil
}

// Clusters is a parsed /clusters?format=json.
type Clusters struct {
	clusters *adminv3.Clusters
}

// ParseClusters parses a proxy's /clusters?format=json.
func ParseClusters(b []byte) (*Clusters, error) {
	var c adminv3.Clusters
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true, Resolver: lenient{}}).Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("decode /clusters?format=json: %w", err)
	}
	return &Clusters{clusters: &c}, nil
}

// section returns the last config of the dump whose type is m's, unmarshalled into m
// (istioctl's Wrapper.getSection takes the last one too), or false when there is none.
func section[T proto.Message](d *ConfigDump, m T) (T, bool, error) {
	url := "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName())
	var found *anypb.Any
	for _, a := range d.dump.GetConfigs() {
		if a.GetTypeUrl() == url {
			found = a
		}
	}
	if found == nil {
		return m, false, nil
	}
	if err := found.UnmarshalTo(m); err != nil {
		return m, false, fmt.Errorf("decode %s: %w", url, err)
	}
	return m, true, nil
}

// errNoSection is istioctl's message for a dump without the section asked for.
func errNoSection(m proto.Message) error {
	return fmt.Errorf("config dump has no configuration type type.googleapis.com/%s", m.ProtoReflect().Descriptor().FullName())
}

// unpack decodes a resource of the dump whatever its type URL's version says (istioctl
// rewrites the URL to v3 for the same reason).
func unpack[T proto.Message](a *anypb.Any, m T) (T, error) {
	err := proto.Unmarshal(a.GetValue(), m)
	return m, err
}

// unpackEach appends to out the resource get finds in each item of a dump section,
// decoded into a new M; items without one (a warming or removed entry) are skipped. A
// decoding failure names what was decoded and its type URL.
func unpackEach[S any, T any, M interface {
	*T
	proto.Message
}](out []M, items []S, get func(S) *anypb.Any, what string) ([]M, error) {
	for _, it := range items {
		a := get(it)
		if a == nil {
			continue
		}
		m, err := unpack(a, M(new(T)))
		if err != nil {
			return nil, fmt.Errorf("decode %s %s: %w", what, a.GetTypeUrl(), err)
		}
		out = append(out, m)
	}
	return out, nil
}

// marshalList renders msgs as istioctl's proto.MessageSlice through
// json.MarshalIndent(..., "", "    "): protobuf JSON names, four-space indent.
func marshalList[T proto.Message](msgs []T, format Format) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			buf.WriteByte(',')
		}
		b, err := (protojson.MarshalOptions{Resolver: lenient{}}).Marshal(m)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
	}
	buf.WriteByte(']')
	return indent(buf.Bytes(), format)
}

// marshalOne renders one message as istioctl's protomarshal.ToJSONWithIndent(m, "    ").
func marshalOne(m proto.Message, format Format) ([]byte, error) {
	b, err := (protojson.MarshalOptions{Resolver: lenient{}}).Marshal(m)
	if err != nil {
		return nil, err
	}
	return indent(b, format)
}

func indent(b []byte, format Format) ([]byte, error) {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "    "); err != nil {
		return nil, err
	}
	if format == YAML {
		return yaml.JSONToYAML(out.Bytes())
	}
	return out.Bytes(), nil
}

func (w Writer) println(b []byte) error {
	_, err := fmt.Fprintln(w.Out, string(b))
	return err
}

// lenient resolves every Any type URL: known types as themselves, unknown ones as a
// message without fields, so a dump that carries Istio's or a newer Envoy's extensions
// still parses (their contents are dropped, as istioctl drops them).
type lenient struct{}

func (lenient) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	if t, err := protoregistry.GlobalTypes.FindMessageByURL(url); err == nil {
		return t, nil
	}
	return unknownType, nil
}

func (lenient) FindMessageByName(name protoreflect.FullName) (protoreflect.MessageType, error) {
	return protoregistry.GlobalTypes.FindMessageByName(name)
}

func (lenient) FindExtensionByName(field protoreflect.FullName) (protoreflect.ExtensionType, error) {
	return protoregistry.GlobalTypes.FindExtensionByName(field)
}

func (lenient) FindExtensionByNumber(message protoreflect.FullName, field protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	return protoregistry.GlobalTypes.FindExtensionByNumber(message, field)
}

// unknownType is a message with no fields (not a well-known type, so its JSON inside an
// Any is an ordinary object whose fields DiscardUnknown drops).
var unknownType = func() protoreflect.MessageType {
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:        proto.String("meshlab/proxyconfig/unknown.proto"),
		Package:     proto.String("meshlab.proxyconfig"),
		Syntax:      proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Unknown")}},
	}, nil)
	if err != nil {
		panic(err)
	}
	return dynamicpb.NewMessageType(fd.Messages().Get(0))
}()

// parsePort reads a --port value: 0 (no filter) or 1-65535.
func parsePort(flag string, p int) error {
	if p < 0 || p > 65535 {
		return fmt.Errorf("--%s %d: want a port from 1 to 65535", flag, p)
	}
	return nil
}

func noneFound(kind string) error { return fmt.Errorf("no %s found", kind) }

func yamlOf(jsonBytes []byte) ([]byte, error) { return yaml.JSONToYAML(jsonBytes) }

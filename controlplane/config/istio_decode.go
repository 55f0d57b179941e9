package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// istioTopFields are the top-level fields of an Istio object meshlab reads; status and
// anything else is refused by name.
var istioTopFields = []string{"apiVersion", "kind", "metadata", "spec"}

// istioMetaFields are the metadata fields accepted on Istio objects and MeshConfig: the
// ones `kubectl get -o yaml` prints are tolerated so a config copied from a cluster loads.
var istioMetaFields = []string{
	"name", "namespace", "labels", "annotations", "uid", "resourceVersion", "generation",
	"creationTimestamp", "managedFields", "selfLink", "ownerReferences", "finalizers", "generateName",
}

// decodeProtoObject decodes an object whose spec is a proto message of istio.io/api (a
// VirtualService, DestinationRule, ServiceEntry or MeshConfig): the top level and metadata
// are checked by name, every unknown spec field is recorded by its full path, then the
// spec is parsed with protojson, so anything valid in Istio's schema parses. It reports
// whether out was decoded cleanly.
func decodeProtoObject(top map[string]any, js []byte, out proto.Message, p problems) bool {
	n := len(*p.list)
	for _, k := range sortedKeys(top) {
		if !slices.Contains(istioTopFields, k) {
			p.addf(k, "unknown field (an Istio object has apiVersion, kind, metadata and spec)")
		}
	}
	if meta, ok := top["metadata"].(map[string]any); ok {
		for _, k := range sortedKeys(meta) {
			if !slices.Contains(istioMetaFields, k) {
				p.addf("metadata."+k, "unknown field")
			}
		}
	}
	spec, ok := top["spec"]
	switch {
	case !ok || spec == nil:
		p.addf("spec", "is required")
		return false
	case !isMap(spec):
		p.addf("spec", "must be a mapping")
		return false
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(js, &fields); err != nil {
		p.addf("", "decode: %v", err)
		return false
	}
	// Decode the spec again with exact numbers: it is edited below and re-encoded.
	dec := json.NewDecoder(bytes.NewReader(fields["spec"]))
	dec.UseNumber()
	if err := dec.Decode(&spec); err != nil {
		p.addf("spec", "decode: %v", err)
		return false
	}
	unknownProtoFields(spec, out.ProtoReflect().Descriptor(), "spec", p)
	if len(*p.list) > n {
		return false
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		p.addf("spec", "decode: %v", err)
		return false
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(specJSON, out); err != nil {
		// protojson starts its messages with "proto:" and, at random, a no-break space.
		msg := strings.TrimPrefix(err.Error(), "proto:")
		p.addf("spec", "%s", strings.TrimLeft(msg, " \u00a0"))
		return false
	}
	return true
}

// unknownProtoFields walks the generic JSON value v alongside message descriptor md,
// recording each key that names no field (protojson accepts a field's JSON name and its
// proto name). Well-known types (Duration, wrappers...) are leaves. Durations written as
// Go durations ("500ms", "1m"), which Istio's parser (golang/protobuf's jsonpb) accepts
// and protojson does not, are rewritten in seconds ("0.500s") in place.
func unknownProtoFields(v any, md protoreflect.MessageDescriptor, path string, p problems) {
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return // a type mismatch: protojson says so
	}
	fields := md.Fields()
	for _, k := range sortedKeys(obj) {
		fd := fields.ByJSONName(k)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(k))
		}
		if fd == nil {
			p.addf(path+"."+k, "unknown field%s", suggestProto(k, fields))
			continue
		}
		child := path + "." + k
		switch {
		case fd.IsMap():
			if fd.MapValue().Kind() != protoreflect.MessageKind {
				continue
			}
			if m, ok := obj[k].(map[string]any); ok {
				for _, mk := range sortedKeys(m) {
					unknownProtoFields(m[mk], fd.MapValue().Message(), child+"["+mk+"]", p)
				}
			}
		case fd.Kind() != protoreflect.MessageKind:
		case fd.IsList():
			if l, ok := obj[k].([]any); ok {
				for i, e := range l {
					unknownProtoFields(e, fd.Message(), child+"["+strconv.Itoa(i)+"]", p)
				}
			}
		case fd.Message().FullName() == "google.protobuf.Duration":
			if str, ok := obj[k].(string); ok {
				d, err := time.ParseDuration(str)
				if err != nil {
					p.addf(child, "%q is not a duration (e.g. 500ms, 2s, 1m)", str)
					continue
				}
				obj[k] = strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
			}
		default:
			unknownProtoFields(obj[k], fd.Message(), child, p)
		}
	}
}

// suggestProto returns ` (did you mean "x"?)` when k matches a field's JSON name but for
// case or for the underscores of its proto name.
func suggestProto(k string, fields protoreflect.FieldDescriptors) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
	for i := range fields.Len() {
		if name := fields.Get(i).JSONName(); norm(name) == norm(k) {
			return ` (did you mean "` + name + `"?)`
		}
	}
	return ""
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func isMap(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

// refuseUnimplemented records every field set in msg whose path (JSON names, list indexes
// and map keys dropped, e.g. "http.match.uri.exact") is not in implemented: meshlab never
// silently ignores a field it does not honour. Well-known types are leaves.
func refuseUnimplemented(msg protoreflect.Message, implemented map[string]bool, kind string, p problems) {
	var walk func(m protoreflect.Message, norm, path string)
	walk = func(m protoreflect.Message, norm, path string) {
		// Fields in declaration order and map keys sorted: protobuf-go randomises Range.
		fields := m.Descriptor().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if !m.Has(fd) {
				continue
			}
			v := m.Get(fd)
			n := joinPath(norm, fd.JSONName())
			at := path + "." + fd.JSONName()
			if !implemented[n] {
				p.addf(at, "is not supported by meshlab (%s supports %s)%s", kind, supportedSummary(implemented, norm), refusalAdvice[kind+" "+n])
				continue
			}
			if fd.Kind() != protoreflect.MessageKind || strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf.") {
				continue
			}
			switch {
			case fd.IsMap():
				if fd.MapValue().Kind() != protoreflect.MessageKind {
					continue
				}
				// Keys may be strings or numbers (PeerAuthentication's portLevelMtls).
				var keys []protoreflect.MapKey
				v.Map().Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
					keys = append(keys, k)
					return true
				})
				slices.SortFunc(keys, compareMapKeys)
				for _, k := range keys {
					walk(v.Map().Get(k).Message(), n+".*", at+"["+k.String()+"]")
				}
			case fd.IsList():
				for i := range v.List().Len() {
					walk(v.List().Get(i).Message(), n, at+"["+strconv.Itoa(i)+"]")
				}
			default:
				walk(v.Message(), n, at)
			}
		}
	}
	walk(msg, "", "spec")
}

// compareMapKeys orders map keys: numbers by value, strings as strings.
func compareMapKeys(a, b protoreflect.MapKey) int {
	switch a.Interface().(type) {
	case uint32, uint64:
		return cmp.Compare(a.Uint(), b.Uint())
	case int32, int64:
		return cmp.Compare(a.Int(), b.Int())
	}
	return strings.Compare(a.String(), b.String())
}

// supportedSummary lists the implemented fields directly under norm, for messages.
func supportedSummary(implemented map[string]bool, norm string) string {
	var names []string
	prefix := norm + "."
	if norm == "" {
		prefix = ""
	}
	for k := range implemented {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok || strings.Contains(rest, ".") {
			continue
		}
		names = append(names, rest)
	}
	if len(names) == 0 {
		return "none of its fields"
	}
	slices.Sort(names)
	where := "here"
	if norm != "" {
		where = "in " + norm
	}
	return fmt.Sprintf("%s: %s", where, strings.Join(names, ", "))
}

package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// decodeStrict decodes the JSON form js of a document into out. Every field that out's
// type does not have is recorded by its full path ("spec.ports[0].prot: unknown field");
// then the first type mismatch, if any. It reports whether out was decoded cleanly.
func decodeStrict(raw any, js []byte, out any, p problems) bool {
	n := len(*p.list)
	unknownFields(raw, reflect.TypeOf(out), "", p)
	if len(*p.list) > n {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			p.addf(te.Field, "cannot decode a %s into %s", te.Value, te.Type)
		} else {
			p.addf("", "decode: %v", err)
		}
		return false
	}
	return true
}

// unknownFields walks the generic JSON value v alongside the Go type t, recording each
// object key that t has no field for. Matching is case-sensitive, as Kubernetes' strict
// decoding is (encoding/json alone would fold case). Types with their own UnmarshalJSON
// (IntOrString, Time...) are leaves.
func unknownFields(v any, t reflect.Type, path string, p problems) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return
	}
	switch val := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(val))
		for k := range val {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for _, k := range keys {
				ft, ok := fields[k]
				if !ok {
					p.addf(joinPath(path, k), "unknown field%s", suggest(k, fields))
					continue
				}
				unknownFields(val[k], ft, joinPath(path, k), p)
			}
		case reflect.Map:
			for _, k := range keys {
				unknownFields(val[k], t.Elem(), joinPath(path, k), p)
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, e := range val {
				unknownFields(e, t.Elem(), path+"["+strconv.Itoa(i)+"]", p)
			}
		}
	}
}

// jsonFields maps the JSON names of struct type t's fields to their types, flattening
// embedded structs as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type)
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for n, typ := range jsonFields(ft) {
					fields[n] = typ
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

// suggest returns ` (did you mean "x"?)` when k matches a field but for case.
func suggest(k string, fields map[string]reflect.Type) string {
	for name := range fields {
		if strings.EqualFold(name, k) {
			return ` (did you mean "` + name + `"?)`
		}
	}
	return ""
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

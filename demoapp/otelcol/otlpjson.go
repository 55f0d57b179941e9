package otelcol

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// OTLP/HTTP's JSON encoding (the OTLP specification's "JSON Protobuf Encoding", which the
// collector's otlp receiver and Jaeger's take with Content-Type application/json): the
// Protobuf JSON mapping, except that trace and span ids are hex strings (not base64),
// and fields of unknown names are ignored. The body is read as JSON, its ids turned into
// the mapping's base64, then decoded by protojson; the answer is protojson's.

// otlpIDLen is the byte length of each id field of OTLP/JSON (spans, links, log records),
// by its JSON name and its proto name.
var otlpIDLen = map[string]int{
	"traceId": 16, "trace_id": 16,
	"spanId": 8, "span_id": 8,
	"parentSpanId": 8, "parent_span_id": 8,
}

// unmarshalOTLPJSON decodes an OTLP/JSON body into m.
func unmarshalOTLPJSON(b []byte, m proto.Message) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // 64-bit times and counts keep every digit
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return errors.New("invalid JSON: data after the top-level value")
	}
	if _, ok := v.(map[string]any); !ok {
		return errors.New("invalid JSON: the body is not an object")
	}
	if err := hexIDsToBase64(v); err != nil {
		return err
	}
	nb, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(nb, m)
}

// hexIDsToBase64 rewrites, anywhere in v, the id fields' hex strings as the base64 the
// Protobuf JSON mapping has for bytes; an id that is not hex of its length is refused,
// as the collector's pdata refuses it ("" is no id).
func hexIDsToBase64(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if n, ok := otlpIDLen[k]; ok {
				if s, isStr := e.(string); isStr {
					if s == "" {
						continue
					}
					id, err := hex.DecodeString(s)
					if err != nil || len(id) != n {
						return fmt.Errorf("%s: %q is not an id (%d bytes in hex)", k, s, n)
					}
					x[k] = base64.StdEncoding.EncodeToString(id)
					continue
				}
			}
			if err := hexIDsToBase64(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := hexIDsToBase64(e); err != nil {
				return err
			}
		}
	}
	return nil
}

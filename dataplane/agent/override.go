package agent

import (
	"fmt"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// parseBootstrapOverride reads a JSON fragment of envoy.config.bootstrap.v3.Bootstrap
// (proto field names, either case), refusing unknown fields by name.
func parseBootstrapOverride(js string) (*bootstrapv3.Bootstrap, error) {
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal([]byte(js), &b); err != nil {
		return nil, fmt.Errorf("parse bootstrap override: %w", err)
	}
	return &b, nil
}

// mergeBootstrapOverride merges the override js into b as Istio's custom bootstrap
// does: proto.Merge, so set scalars replace, messages merge and repeated fields (static
// listeners and clusters) are appended. An empty js leaves b as is.
func mergeBootstrapOverride(b *bootstrapv3.Bootstrap, js string) error {
	if js == "" {
		return nil
	}
	o, err := parseBootstrapOverride(js)
	if err != nil {
		return err
	}
	proto.Merge(b, o)
	return nil
}

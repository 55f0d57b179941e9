package fidelity

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// meshlabWDS returns what meshlab's WDS generator (controlplane/xds: Addresses and
// Authorizations, what controlplane/discovery serves a ztunnel) makes of m for the lab's
// node, as Istio's types by resource name.
func meshlabWDS(m *model.Model) (map[string]map[string]proto.Message, error) {
	out := map[string]map[string]proto.Message{addressType: {}, authorizationType: {}}
	add := func(typ, name string, r proto.Message) error {
		im, err := asIstio(r)
		if err != nil {
			return err
		}
		if _, dup := out[typ][name]; dup {
			return fmt.Errorf("meshlab's WDS names two %s resources %q", shortNames[typ], name)
		}
		out[typ][name] = im
		return nil
	}
	for _, a := range xds.Addresses(m, xds.WDSOptions{Node: ambientNode}) {
		if err := add(addressType, xds.AddressName(a), a); err != nil {
			return nil, err
		}
	}
	for _, a := range xds.Authorizations(m) {
		if err := add(authorizationType, xds.AuthorizationName(a), a); err != nil {
			return nil, err
		}
	}
	return out, nil
}

package xdsclient

import (
	"fmt"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/ambientapi/security"
	"github.com/meshlab/meshlab/ambientapi/workload"
)

// Store is what a response is applied to: ztunnel's state (dataplane/ztunnel/state).
type Store interface {
	ApplyAddresses(upserts []*workload.Address, removed []string)
	ApplyAuthorizations(upserts []*security.Authorization, removed []string)
}

// ApplyTo decodes one response's resources of typeURL and applies them, with the names
// it removes, to s, as ztunnel's handlers do: an Address that is neither a workload nor
// a service, a resource that does not decode or a type it did not subscribe to refuses
// the whole response (the caller NACKs it) and s is left as it was. `meshlab ztunnel`
// and the fidelity harness's judge of istiod's WDS both apply through it.
func ApplyTo(s Store, typeURL string, resources []*discoveryv3.Resource, removed []string) error {
	switch typeURL {
	case AddressType:
		addrs := make([]*workload.Address, 0, len(resources))
		for _, r := range resources {
			a := &workload.Address{}
			if err := proto.Unmarshal(r.GetResource().GetValue(), a); err != nil {
				return fmt.Errorf("decode address %q: %w", r.GetName(), err)
			}
			if a.GetWorkload() == nil && a.GetService() == nil {
				return fmt.Errorf("address %q is neither a workload nor a service", r.GetName())
			}
			addrs = append(addrs, a)
		}
		s.ApplyAddresses(addrs, removed)
	case AuthorizationType:
		auths := make([]*security.Authorization, 0, len(resources))
		for _, r := range resources {
			a := &security.Authorization{}
			if err := proto.Unmarshal(r.GetResource().GetValue(), a); err != nil {
				return fmt.Errorf("decode authorization %q: %w", r.GetName(), err)
			}
			auths = append(auths, a)
		}
		s.ApplyAuthorizations(auths, removed)
	default:
		return fmt.Errorf("unexpected type %s", typeURL)
	}
	return nil
}

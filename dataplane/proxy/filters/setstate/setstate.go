// Package setstate is Envoy's set_filter_state filters, HTTP (on_request_headers) and
// network (on_new_connection): each value renders a format string for the stream or
// connection and stores the result as a filter state object under its key, optionally
// shared with the upstream connections (internal listeners) made after it. Objects are
// made by the factory the key names (or factory_key): the original_dst listener
// filter's address keys, which keep only an IP:port, and the string factories istiod
// uses (istio.hashable_string, envoy.string).
package setstate

import (
	"errors"
	"fmt"
	"net/netip"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	httpsfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/set_filter_state/v3"
	netsfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/accesslog"
	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
)

// The filters' config types.
const (
	HTTPConfigType    = "envoy.extensions.filters.http.set_filter_state.v3.Config"
	NetworkConfigType = "envoy.extensions.filters.network.set_filter_state.v3.Config"
)

// The original_dst listener filter's keys: an internal listener's connection takes its
// local and remote addresses from them.
const (
	KeyLocalIP  = "envoy.filters.listener.original_dst.local_ip"
	KeyRemoteIP = "envoy.filters.listener.original_dst.remote_ip"
)

var allow = fieldcheck.Allow{
	"envoy.extensions.filters.http.set_filter_state.v3.Config":    {"on_request_headers"},
	"envoy.extensions.filters.network.set_filter_state.v3.Config": {"on_new_connection"},
	// read_only is deprecated in Envoy and has no effect there.
	"envoy.extensions.filters.common.set_filter_state.v3.FilterStateValue": {
		"object_key", "factory_key", "format_string", "read_only", "shared_with_upstream", "skip_if_empty",
	},
	"envoy.config.core.v3.SubstitutionFormatString": {"text_format_source", "text_format"},
	"envoy.config.core.v3.DataSource":               {"inline_string"},
}

// factory makes an object from its rendered bytes, false when they do not make one
// (Envoy then skips the value).
type factory func(string) (string, bool)

func stringObject(s string) (string, bool) { return s, true }

// addressObject is the address objects' factory: an IP address and port.
func addressObject(s string) (string, bool) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return "", false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String(), true
}

// factories are the object factories the proxy implements, by factory key.
var factories = map[string]factory{
	KeyLocalIP:              addressObject,
	KeyRemoteIP:             addressObject,
	"istio.hashable_string": stringObject,
	"envoy.string":          stringObject,
}

// Value is one compiled FilterStateValue.
type Value struct {
	Key         string
	make        factory
	format      *accesslog.FormatString
	Sharing     internalconn.Sharing
	SkipIfEmpty bool
}

// Config is a compiled set_filter_state filter. Immutable.
type Config struct {
	Values []Value
}

// CompileHTTP compiles envoy.filters.http.set_filter_state's typed_config. Errors name
// the field below typed_config.
func CompileHTTP(a *anypb.Any) (*Config, error) {
	var c httpsfsv3.Config
	if err := unpack(a, &c); err != nil {
		return nil, err
	}
	return compile("on_request_headers", c.GetOnRequestHeaders())
}

// CompileNetwork compiles envoy.filters.network.set_filter_state's typed_config.
func CompileNetwork(a *anypb.Any) (*Config, error) {
	var c netsfsv3.Config
	if err := unpack(a, &c); err != nil {
		return nil, err
	}
	return compile("on_new_connection", c.GetOnNewConnection())
}

type validated interface {
	proto.Message
	ValidateAll() error
}

func unpack(a *anypb.Any, m validated) error {
	if err := a.UnmarshalTo(m); err != nil {
		return fmt.Errorf("typed_config: %w", err)
	}
	if err := m.ValidateAll(); err != nil {
		return fmt.Errorf("typed_config: %w", err)
	}
	if err := allow.Check(m); err != nil {
		return fmt.Errorf("typed_config.%w", err)
	}
	return nil
}

func compile(field string, vs []*commonv3.FilterStateValue) (*Config, error) {
	c := &Config{}
	for i, v := range vs {
		where := fmt.Sprintf("typed_config.%s[%d]", field, i)
		key := v.GetObjectKey()
		fk := v.GetFactoryKey()
		if fk == "" {
			fk = key
		}
		mk, ok := factories[fk]
		if !ok {
			return nil, fmt.Errorf("%s: '%s' does not have an object factory in meshlab proxy", where, fk)
		}
		fs := v.GetFormatString()
		text := fs.GetTextFormatSource().GetInlineString()
		if fs.GetTextFormatSource() == nil {
			text = fs.GetTextFormat() //nolint:staticcheck // Envoy still reads the deprecated text_format
		}
		if fs.GetTextFormatSource() == nil && fs.GetTextFormat() == "" { //nolint:staticcheck // see above
			return nil, fmt.Errorf("%s.format_string: only a text format is supported by meshlab proxy", where)
		}
		f, err := accesslog.CompileFormatString(text)
		if err != nil {
			return nil, fmt.Errorf("%s.format_string: %w", where, err)
		}
		val := Value{Key: key, make: mk, format: f, SkipIfEmpty: v.GetSkipIfEmpty()}
		switch v.GetSharedWithUpstream() {
		case commonv3.FilterStateValue_NONE:
		case commonv3.FilterStateValue_ONCE:
			val.Sharing = internalconn.SharedOnce
		case commonv3.FilterStateValue_TRANSITIVE:
			val.Sharing = internalconn.SharedTransitive
		default:
			return nil, fmt.Errorf("%s.shared_with_upstream: unknown value %s", where, v.GetSharedWithUpstream())
		}
		c.Values = append(c.Values, val)
	}
	if len(c.Values) == 0 {
		return nil, errors.New("typed_config." + field + ": no value to set")
	}
	return c, nil
}

// Apply renders every value for info, in order, and returns fs with the objects set: a
// copy when anything changed (fs is never written). An empty rendering is skipped when
// the value says so; a rendering its factory cannot make an object of is skipped; a
// later value of a key replaces an earlier one. Each value sees the objects set before
// it (info.FilterState).
func (c *Config) Apply(fs map[string]internalconn.Object, info *accesslog.Info) map[string]internalconn.Object {
	out := fs
	copied := false
	for _, v := range c.Values {
		info.FilterState = internalconn.Values(out)
		s := v.format.Render(info)
		if s == "" && v.SkipIfEmpty {
			continue
		}
		obj, ok := v.make(s)
		if !ok {
			continue
		}
		if !copied {
			out = make(map[string]internalconn.Object, len(fs)+len(c.Values))
			for k, o := range fs {
				out[k] = o
			}
			copied = true
		}
		out[v.Key] = internalconn.Object{Value: obj, Sharing: v.Sharing}
	}
	info.FilterState = internalconn.Values(out)
	return out
}

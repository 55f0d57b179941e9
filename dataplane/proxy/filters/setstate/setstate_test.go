package setstate

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	netsfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/accesslog"
	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
)

func value(key, factory, format string, share commonv3.FilterStateValue_SharedWithUpstream) *commonv3.FilterStateValue {
	return &commonv3.FilterStateValue{
		Key:        &commonv3.FilterStateValue_ObjectKey{ObjectKey: key},
		FactoryKey: factory,
		Value: &commonv3.FilterStateValue_FormatString{FormatString: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
				Specifier: &corev3.DataSource_InlineString{InlineString: format}}}}},
		SharedWithUpstream: share,
	}
}

func network(t *testing.T, vs ...*commonv3.FilterStateValue) (*Config, error) {
	t.Helper()
	a, err := anypb.New(&netsfsv3.Config{OnNewConnection: vs})
	if err != nil {
		t.Fatal(err)
	}
	return CompileNetwork(a)
}

// Values render for the connection, go through their key's factory (an address key
// keeps only an IP:port) and carry their sharing; the next internal listener receives
// once-shared objects unshared and transitive ones still transitive.
func TestApplyAndShare(t *testing.T) {
	c, err := network(t,
		value(KeyLocalIP, "", "%FILTER_STATE(prev:PLAIN)%", commonv3.FilterStateValue_ONCE),
		value(KeyRemoteIP, "", "%DOWNSTREAM_PEER_URI_SAN%", commonv3.FilterStateValue_ONCE), // not an address: skipped
		value("target", "istio.hashable_string", "%DYNAMIC_METADATA(istio:target)%", commonv3.FilterStateValue_TRANSITIVE),
		value("local", "envoy.string", "%DOWNSTREAM_LOCAL_URI_SAN%", commonv3.FilterStateValue_NONE),
	)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]internalconn.Object{"prev": {Value: "10.96.0.14:9080"}}
	info := &accesslog.Info{PeerURISAN: "spiffe://x", LocalURISAN: "spiffe://me"}
	out := c.Apply(in, info)
	if len(in) != 1 {
		t.Errorf("Apply changed its input: %v", in)
	}
	want := map[string]internalconn.Object{
		"prev":     {Value: "10.96.0.14:9080"},
		KeyLocalIP: {Value: "10.96.0.14:9080", Sharing: internalconn.SharedOnce},
		"target":   {Value: "-", Sharing: internalconn.SharedTransitive},
		"local":    {Value: "spiffe://me"},
	}
	if len(out) != len(want) {
		t.Fatalf("state = %v, want %v", out, want)
	}
	for k, o := range want {
		if out[k] != o {
			t.Errorf("%s = %+v, want %+v", k, out[k], o)
		}
	}
	got := internalconn.Received(out)
	if len(got) != 2 || got[KeyLocalIP].Sharing != internalconn.SharedNone || got["target"].Sharing != internalconn.SharedTransitive {
		t.Errorf("received = %v", got)
	}
}

// A key without an object factory the proxy implements is refused by name.
func TestUnknownFactoryRefused(t *testing.T) {
	_, err := network(t, value("envoy.network.upstream_server_name", "", "x", commonv3.FilterStateValue_NONE))
	if err == nil || !strings.Contains(err.Error(), "on_new_connection[0]: 'envoy.network.upstream_server_name' does not have an object factory") {
		t.Errorf("err = %v", err)
	}
}

// A later value of a key replaces an earlier one; skip_if_empty skips an empty
// rendering.
func TestReplaceAndSkipIfEmpty(t *testing.T) {
	empty := value("e", "envoy.string", "", commonv3.FilterStateValue_NONE)
	empty.SkipIfEmpty = true
	c, err := network(t, value("k", "envoy.string", "first", commonv3.FilterStateValue_NONE),
		value("k", "envoy.string", "second", commonv3.FilterStateValue_NONE), empty)
	if err != nil {
		t.Fatal(err)
	}
	out := c.Apply(nil, &accesslog.Info{})
	if out["k"].Value != "second" {
		t.Errorf("k = %q, want the later value", out["k"].Value)
	}
	if _, ok := out["e"]; ok {
		t.Errorf("an empty value with skip_if_empty was set")
	}
}

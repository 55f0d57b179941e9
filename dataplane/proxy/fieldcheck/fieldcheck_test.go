package fieldcheck

import (
	"errors"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

func TestCheckNamesTheFirstUnsupportedFieldWithItsPath(t *testing.T) {
	allow := Allow{
		"envoy.config.listener.v3.Listener":         {"name", "filter_chains"},
		"envoy.config.listener.v3.FilterChain":      {"filter_chain_match"},
		"envoy.config.listener.v3.FilterChainMatch": {"destination_port"},
	}
	l := &listenerv3.Listener{Name: "x", FilterChains: []*listenerv3.FilterChain{
		{FilterChainMatch: &listenerv3.FilterChainMatch{}},
		{FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{"a"}}},
	}}
	err := allow.Check(l)
	var ue *UnsupportedError
	if !errors.As(err, &ue) || ue.Path != "filter_chains[1].filter_chain_match.server_names" {
		t.Errorf("err = %v, want filter_chains[1].filter_chain_match.server_names", err)
	}
	l.FilterChains[1].FilterChainMatch.ServerNames = nil
	l.Address = &corev3.Address{}
	if err := allow.Check(l); err == nil || err.Error() != "address: field is not supported by meshlab proxy" {
		t.Errorf("err = %v", err)
	}
	if err := allow.Check(&listenerv3.Listener{Name: "ok"}); err != nil {
		t.Errorf("allowed message refused: %v", err)
	}
}

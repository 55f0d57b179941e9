package proxy

import (
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

// Short names for the proto types the config dump walks.
type (
	bootstrapMsg   = bootstrapv3.Bootstrap
	nodeMsg        = corev3.Node
	listenerMsg    = listenerv3.Listener
	filterChainMsg = listenerv3.FilterChain
)

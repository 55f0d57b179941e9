package discovery

import (
	"context"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// Delta xDS (DELTA_GRPC): go-control-plane's delta server serves the same snapshots as
// SotW, from the snapshot cache the shared cache embeds (sotwcache.go), sending only the
// resources whose content changed; the tracker follows delta streams as it does SotW
// ones, so proxy-status, history and the faults see both alike.
//
// A delta response's version is its system_version_info, the snapshot version that
// changed the resources it carries. An ACK or NACK names a response by its nonce only;
// the tracker maps it back to the version of the last response of that type on the
// stream (an answer to an older nonce is superseded, and ignored). A NACK leaves Acked
// on the last version applied. Since a delta proxy is sent a type only when the type's
// resources changed, its Want of a type is the version in which they last changed, not
// the snapshot's (Status).

// deltaKey is the tracker's key of a delta stream: go-control-plane numbers SotW and delta
// streams apart, from 1 each, so delta streams take the negative numbers.
func deltaKey(streamID int64) int64 { return -streamID }

func (t *tracker) onDeltaOpen(ctx context.Context, streamID int64, typ string) error {
	return t.onOpen(ctx, deltaKey(streamID), typ)
}

func (t *tracker) onDeltaClosed(streamID int64, node *core.Node) {
	t.onClosed(deltaKey(streamID), node)
}

// onDeltaRequest records the stream's node on its first request, then every ACK and
// NACK, as onRequest does for SotW.
func (t *tracker) onDeltaRequest(streamID int64, req *discoverypb.DeltaDiscoveryRequest) error {
	key := deltaKey(streamID)
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.streams[key]
	if !ok {
		id := req.GetNode().GetId()
		if id == "" {
			return nil // go-control-plane serves nothing to such a stream
		}
		st = &streamState{node: id, sent: map[string]sentResponse{}, delta: true}
		t.streams[key] = st
		n := t.node(id)
		n.streams++
		n.delta = true
		t.log.Info("proxy connected", "node", id, "stream", streamID, "protocol", "delta")
		t.emit(Event{Kind: EventConnected, NodeID: id})
	}
	typ := req.GetTypeUrl()
	n := t.node(st.node)
	ts := n.types[typ]
	defer func() { n.types[typ] = ts }()
	if req.GetResponseNonce() == "" {
		return nil // a subscription, not an answer
	}
	sent := st.sent[typ]
	if sent.nonce != req.GetResponseNonce() {
		return nil // answers a superseded response
	}
	sent.answered, sent.nack = true, req.GetErrorDetail().GetMessage()
	st.sent[typ] = sent
	if detail := req.GetErrorDetail(); detail != nil {
		ts.NackError = detail.GetMessage()
		ts.LastNack = t.now()
		t.log.Warn("proxy rejected config", "node", st.node, "type", typ, "nonce", req.GetResponseNonce(),
			"rejected", sent.version, "error", detail.GetMessage())
		t.emit(Event{Kind: EventNACK, NodeID: st.node, TypeURL: typ, Version: sent.version, Error: detail.GetMessage()})
		return nil
	}
	ts.Acked, ts.LastAck = sent.version, t.now()
	t.log.Debug("proxy acked config", "node", st.node, "type", typ, "version", sent.version)
	t.emit(Event{Kind: EventACK, NodeID: st.node, TypeURL: typ, Version: sent.version})
	return nil
}

// onDeltaResponse records a delta response about to be sent, then runs beforeSend (the
// faults' delays and holds), as onResponse does for SotW.
func (t *tracker) onDeltaResponse(streamID int64, req *discoverypb.DeltaDiscoveryRequest, resp *discoverypb.DeltaDiscoveryResponse) {
	key := deltaKey(streamID)
	t.mu.Lock()
	st, ok := t.streams[key]
	if !ok {
		t.mu.Unlock()
		return
	}
	id, typ := st.node, resp.GetTypeUrl()
	st.sent[typ] = sentResponse{version: resp.GetSystemVersionInfo(), nonce: resp.GetNonce()}
	n := t.node(id)
	ts := n.types[typ]
	ts.Sent, ts.Nonce = resp.GetSystemVersionInfo(), resp.GetNonce()
	n.types[typ] = ts
	t.log.Debug("config pushed", "node", id, "type", typ, "version", ts.Sent, "resources", len(resp.GetResources()),
		"removed", len(resp.GetRemovedResources()), "subscribed", req.GetResourceNamesSubscribe())
	t.emit(Event{Kind: EventPushed, NodeID: id, TypeURL: typ, Version: ts.Sent})
	ctx := t.ctxs[key]
	t.mu.Unlock()
	if t.beforeSend != nil && ctx != nil {
		t.beforeSend(ctx, id)
	}
}

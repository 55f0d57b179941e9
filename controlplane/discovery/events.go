package discovery

// Event is one thing that happened on an ADS stream, for the lab's event bus: a proxy
// connected or disconnected, a config was pushed, ACKed or NACKed, or an update could
// not generate its config.
type Event struct {
	Kind    string // EventConnected, EventDisconnected, EventPushed, EventACK, EventNACK, EventPushError
	NodeID  string
	TypeURL string // empty for connect/disconnect and a push error
	Version string // the version pushed, ACKed, or rejected; the update's, for a push error
	Error   string // the proxy's error_detail, for a NACK; why its config was not generated, for a push error
}

// Event kinds.
const (
	EventConnected    = "xds.connected"
	EventDisconnected = "xds.disconnected"
	EventPushed       = "xds.pushed"
	EventACK          = "xds.ack"
	EventNACK         = "xds.nack"
	// EventPushError: an update could not generate the proxy's config, which keeps its
	// previous one (istiod's push error for one proxy: the others are pushed).
	EventPushError = "xds.push-error"
)

// emit hands e to the observer, if any, and wakes the waiters of the streams' next
// change (changes). It is called with the tracker's lock held, so the observer must not
// block or call back into the server (the lab's bus never blocks).
func (t *tracker) emit(e Event) {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
	if t.observe != nil {
		t.observe(e)
	}
}

// pushFailed emits EventPushError for node: the update that made version could not
// generate its config.
func (t *tracker) pushFailed(node, version string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.emit(Event{Kind: EventPushError, NodeID: node, Version: version, Error: err.Error()})
}

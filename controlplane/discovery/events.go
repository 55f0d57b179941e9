package discovery

// Event is one thing that happened on an ADS stream, for the lab's event bus: a proxy
// connected or disconnected, a config was pushed, ACKed or NACKed.
type Event struct {
	Kind    string // EventConnected, EventDisconnected, EventPushed, EventACK, EventNACK
	NodeID  string
	TypeURL string // empty for connect/disconnect
	Version string // the version pushed, ACKed, or rejected
	Error   string // the proxy's error_detail, for a NACK
}

// Event kinds.
const (
	EventConnected    = "xds.connected"
	EventDisconnected = "xds.disconnected"
	EventPushed       = "xds.pushed"
	EventACK          = "xds.ack"
	EventNACK         = "xds.nack"
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

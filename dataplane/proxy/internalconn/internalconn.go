// Package internalconn is Envoy's internal listeners' transport inside one proxy: a
// cluster endpoint with an envoy_internal_address connects, in memory, to the listener of
// that name (one with internal_listener set), which serves the connection as if it had
// accepted it. The connection carries what Envoy hands an internal listener's downstream:
// the upstream host's and cluster's metadata the internal_upstream transport socket
// passes through (as the downstream's dynamic metadata), and the filter state objects
// the upstream side shared with it (set_filter_state's shared_with_upstream).
package internalconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"google.golang.org/protobuf/types/known/structpb"
)

// Network is the net.Addr network of internal addresses.
const Network = "envoy_internal"

// Addr is an envoy_internal_address: the internal listener's name and the endpoint id
// that tells apart several endpoints of one listener.
type Addr struct {
	Listener   string
	EndpointID string
}

// Network implements net.Addr.
func (Addr) Network() string { return Network }

// String is the address as Envoy prints it: envoy://<listener>/<endpoint id>.
func (a Addr) String() string { return "envoy://" + a.Listener + "/" + a.EndpointID }

// Conn is one side of an internal connection. The listener side's Metadata and
// FilterState are what the dialing side passed; its LocalAddr is the internal address.
type Conn struct {
	net.Conn
	Local, Remote Addr
	// Metadata is the passthrough metadata by filter namespace (the downstream's dynamic
	// metadata on the listener side); nil without any.
	Metadata map[string]*structpb.Struct
	// FilterState are the filter state objects the dialing side shared with this
	// connection, by key: an object shared once arrives unshared (it goes no further), a
	// transitive one stays transitive.
	FilterState map[string]Object
}

// Sharing is how a filter state object passes to the upstream connections made under it,
// as Envoy's StreamSharing (set_filter_state's shared_with_upstream).
type Sharing uint8

// The sharing modes: none; once (the next internal listener's connection receives it,
// unshared); transitive (every internal hop after it receives it, still transitive).
const (
	SharedNone Sharing = iota
	SharedOnce
	SharedTransitive
)

// Object is one filter state object in its string form (what %FILTER_STATE(key:PLAIN)%
// prints) and its sharing. Data is the object itself when it is more than its string
// (the peer_metadata filter's peers); nil for string objects. It is never modified.
type Object struct {
	Value   string
	Sharing Sharing
	Data    any
}

// Values returns the plain values of fs by key (nil for an empty fs).
func Values(fs map[string]Object) map[string]string {
	if len(fs) == 0 {
		return nil
	}
	out := make(map[string]string, len(fs))
	for k, o := range fs {
		out[k] = o.Value
	}
	return out
}

// Received is what an internal listener's connection holds of the objects shared with
// it: once-shared objects lose their sharing, transitive ones keep it, unshared ones do
// not pass.
func Received(fs map[string]Object) map[string]Object {
	var out map[string]Object
	for k, o := range fs {
		switch o.Sharing {
		case SharedOnce:
			o.Sharing = SharedNone
		case SharedTransitive:
		default:
			continue
		}
		if out == nil {
			out = map[string]Object{}
		}
		out[k] = o
	}
	return out
}

// LocalAddr implements net.Conn.
func (c *Conn) LocalAddr() net.Addr { return c.Local }

// CloseWrite half-closes the connection: the other side reads EOF, this side can still
// read what it sends (Envoy's internal connections carry half-closes).
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// RemoteAddr implements net.Conn.
func (c *Conn) RemoteAddr() net.Addr { return c.Remote }

// ErrNoListener is a dial to a name no internal listener has (Envoy resets the upstream
// connection: a connect failure).
var ErrNoListener = errors.New("no internal listener")

// Registry holds the running internal listeners by name. Safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	listeners map[string]Accept
}

// Accept is an internal listener's side of a connection: it takes conn and returns the
// function that serves it until the listener is done with it, or nil when it refused
// conn (and closed it). It must not block: the serving is the returned function's.
type Accept func(conn *Conn) (serve func())

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{listeners: map[string]Accept{}} }

// Register makes name accept connections with accept; a second Register of name
// replaces the first.
func (r *Registry) Register(name string, accept Accept) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listeners[name] = accept
}

// Unregister removes name; connections already accepted are not touched.
func (r *Registry) Unregister(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.listeners, name)
}

// Has reports whether an internal listener named name is running.
func (r *Registry) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.listeners[name]
	return ok
}

// Dial connects to the internal listener of addr, handing it md and the filter state
// shared through ctx (WithFilterState). The connection is an in-memory pipe, buffered
// each way as Envoy's, that carries half-closes; the listener serves it on a goroutine
// of its own.
func (r *Registry) Dial(ctx context.Context, addr Addr, md map[string]*structpb.Struct) (net.Conn, error) {
	client, server := pipe()
	peer := Addr{Listener: addr.Listener, EndpointID: "client"}
	serve, err := r.Hand(ctx, addr, md, server)
	if err != nil {
		return nil, err
	}
	if serve != nil {
		go serve()
	}
	return &Conn{Conn: client, Local: peer, Remote: addr}, nil
}

// Hand gives the internal listener of addr a connection that already exists (conn: a
// terminated CONNECT stream), with md and the filter state shared through ctx, as Dial
// gives it its pipe's end. The caller runs the returned serve (nil when the listener
// refused conn and closed it) on its own goroutine: the stream's bytes then go between
// the stream and the listener's filters with no pipe and no copying goroutine between
// them.
func (r *Registry) Hand(ctx context.Context, addr Addr, md map[string]*structpb.Struct, conn net.Conn) (serve func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.RLock()
	accept := r.listeners[addr.Listener]
	r.mu.RUnlock()
	if accept == nil {
		return nil, fmt.Errorf("%s: %w %q", addr, ErrNoListener, addr.Listener)
	}
	peer := Addr{Listener: addr.Listener, EndpointID: "client"}
	return accept(&Conn{Conn: conn, Local: addr, Remote: peer, Metadata: md, FilterState: Received(FilterStateFrom(ctx))}), nil
}

type filterStateKey struct{}

// WithFilterState returns ctx carrying the filter state objects fs shares with the
// upstream connections made under it (those fs shares, over any ctx already carries).
func WithFilterState(ctx context.Context, fs map[string]Object) context.Context {
	var merged map[string]Object
	for k, o := range fs {
		if o.Sharing == SharedNone {
			continue
		}
		if merged == nil {
			merged = map[string]Object{}
			for k, v := range FilterStateFrom(ctx) {
				merged[k] = v
			}
		}
		merged[k] = o
	}
	if merged == nil {
		return ctx
	}
	return context.WithValue(ctx, filterStateKey{}, merged)
}

// FilterStateFrom returns the filter state objects shared through ctx, nil without any.
// The map must not be changed.
func FilterStateFrom(ctx context.Context) map[string]Object {
	fs, _ := ctx.Value(filterStateKey{}).(map[string]Object)
	return fs
}

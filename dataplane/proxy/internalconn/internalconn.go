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
	// FilterState are the filter state objects shared with this connection, by key, as
	// their string form.
	FilterState map[string]string
}

// LocalAddr implements net.Conn.
func (c *Conn) LocalAddr() net.Addr { return c.Local }

// RemoteAddr implements net.Conn.
func (c *Conn) RemoteAddr() net.Addr { return c.Remote }

// ErrNoListener is a dial to a name no internal listener has (Envoy resets the upstream
// connection: a connect failure).
var ErrNoListener = errors.New("no internal listener")

// Registry holds the running internal listeners by name. Safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	listeners map[string]func(*Conn)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{listeners: map[string]func(*Conn){}} }

// Register makes name accept connections with accept (which owns each connection and
// must not block); a second Register of name replaces the first.
func (r *Registry) Register(name string, accept func(*Conn)) {
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
// shared through ctx (WithFilterState). The connection is a synchronous in-memory pipe.
func (r *Registry) Dial(ctx context.Context, addr Addr, md map[string]*structpb.Struct) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.RLock()
	accept := r.listeners[addr.Listener]
	r.mu.RUnlock()
	if accept == nil {
		return nil, fmt.Errorf("%s: %w %q", addr, ErrNoListener, addr.Listener)
	}
	client, server := net.Pipe()
	peer := Addr{Listener: addr.Listener, EndpointID: "client"}
	accept(&Conn{Conn: server, Local: addr, Remote: peer, Metadata: md, FilterState: FilterStateFrom(ctx)})
	return &Conn{Conn: client, Local: peer, Remote: addr}, nil
}

type filterStateKey struct{}

// WithFilterState returns ctx carrying the filter state objects shared with upstream
// connections made under it (added to any ctx already carries; fs wins).
func WithFilterState(ctx context.Context, fs map[string]string) context.Context {
	if len(fs) == 0 {
		return ctx
	}
	merged := map[string]string{}
	for k, v := range FilterStateFrom(ctx) {
		merged[k] = v
	}
	for k, v := range fs {
		merged[k] = v
	}
	return context.WithValue(ctx, filterStateKey{}, merged)
}

// FilterStateFrom returns the filter state shared through ctx, nil without any. The map
// must not be changed.
func FilterStateFrom(ctx context.Context) map[string]string {
	fs, _ := ctx.Value(filterStateKey{}).(map[string]string)
	return fs
}

package hotrestart

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// DefaultReplyTimeout is how long a child waits for its parent's reply before it treats
// the parent as not answering.
const DefaultReplyTimeout = 5 * time.Second

// Options configure a Restarter.
type Options struct {
	BaseID       uint32        // required (0 is Envoy's default)
	Epoch        uint32        // required (0: no parent)
	SocketPath   string        // optional: DefaultSocketPath when empty
	ReplyTimeout time.Duration // optional: DefaultReplyTimeout when zero
	Logger       *slog.Logger  // required
}

// Restarter owns a process's two hot restart sockets: on the parent socket it serves
// its child (epoch+1), on the child socket it talks to its parent (epoch-1). Child
// requests are serialized, one outstanding at a time, as in Envoy; all methods are safe
// for concurrent use.
type Restarter struct {
	opts   Options
	parent *rpcSocket // receives requests from our child
	child  *rpcSocket // receives replies from our parent

	mu         sync.Mutex // serializes child requests
	terminated bool
}

// New binds the process's parent and child sockets. It fails, as Envoy does, when
// another process holds them: a process with the same base id and an epoch equal
// modulo 3 still runs.
func New(o Options) (*Restarter, error) {
	if o.SocketPath == "" {
		o.SocketPath = DefaultSocketPath
	}
	if o.ReplyTimeout == 0 {
		o.ReplyTimeout = DefaultReplyTimeout
	}
	p, err := bindSocket(SocketName(o.SocketPath, RoleParent, o.BaseID, o.Epoch))
	if err != nil {
		return nil, fmt.Errorf("unable to bind domain socket with base_id=%d (see --base-id option): %w", o.BaseID, err)
	}
	c, err := bindSocket(SocketName(o.SocketPath, RoleChild, o.BaseID, o.Epoch))
	if err != nil {
		_ = p.close()
		return nil, fmt.Errorf("unable to bind domain socket with base_id=%d (see --base-id option): %w", o.BaseID, err)
	}
	return &Restarter{opts: o, parent: p, child: c}, nil
}

// Epoch returns the process's restart epoch.
func (r *Restarter) Epoch() uint32 { return r.opts.Epoch }

// Close closes both sockets; ServeChild returns.
func (r *Restarter) Close() error {
	return errors.Join(r.parent.close(), r.child.close())
}

// Parent is what a process does for its child. ServeChild calls its methods from one
// goroutine, one at a time; none may block for long.
type Parent interface {
	// ShutdownAdmin closes the admin listener and returns the start time of the first
	// epoch.
	ShutdownAdmin() time.Time
	// ListenSocket returns a duplicate of the listen socket bound to address
	// ("tcp://127.0.0.1:80"), or nil when there is none. The caller closes it.
	ListenSocket(address string) *os.File
	// Stats returns counter deltas since the previous call and current gauges.
	Stats() *Stats
	// DrainListeners stops accepting and starts the drain sequence.
	DrainListeners()
	// Terminate shuts the process down.
	Terminate()
}

// ServeChild answers the child's requests until ctx ends or Close is called.
func (r *Restarter) ServeChild(ctx context.Context, p Parent) error {
	log := r.opts.Logger
	to := SocketName(r.opts.SocketPath, RoleChild, r.opts.BaseID, r.opts.Epoch+1)
	// The loop sleeps in recv until a child writes: an idle proxy does not wake up for
	// it. The end of ctx sets a read deadline in the past, which no recv here replaces,
	// so the loop sees it whether it is in recv or about to enter it.
	stop := context.AfterFunc(ctx, r.parent.interrupt)
	defer stop()
	for ctx.Err() == nil {
		m, f, err := r.parent.recv(time.Time{})
		closeFile(f) // a child never sends fds
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if errors.Is(err, errBadWire) {
				log.Warn(fmt.Sprintf("hot restart: %v", err))
				continue
			}
			return nil // socket closed
		}
		if m.Request == nil {
			continue
		}
		reply, file := r.answer(p, m.Request)
		if reply == nil {
			continue
		}
		if err := r.parent.send(to, reply, file); err != nil {
			log.Warn(fmt.Sprintf("hot restart: reply to child: %v", err))
		}
		if file != nil {
			_ = file.Close()
		}
	}
	return nil
}

// answer handles one request; a nil reply means the request has none.
func (r *Restarter) answer(p Parent, req *Request) (*Message, *os.File) {
	log := r.opts.Logger
	switch req.Kind {
	case KindShutdownAdmin:
		log.Warn("shutting down admin due to child startup")
		start := p.ShutdownAdmin()
		return &Message{Reply: &Reply{Kind: KindShutdownAdmin, OriginalStartTimeUnixSeconds: uint64(start.Unix())}}, nil
	case KindPassListenSocket:
		f := p.ListenSocket(req.Address)
		fd := int32(-1)
		if f != nil {
			if n, err := rawFD(f); err == nil {
				fd = int32(n)
			}
		}
		log.Info(fmt.Sprintf("hot restart: pass listen socket %s to child: fd %d", req.Address, fd))
		return &Message{Reply: &Reply{Kind: KindPassListenSocket, FD: fd}}, f
	case KindStats:
		return &Message{Reply: &Reply{Kind: KindStats, Stats: p.Stats()}}, nil
	case KindDrainListeners:
		log.Info("hot restart: child is live: draining listeners")
		p.DrainListeners()
		return nil, nil
	case KindTerminate:
		log.Info("shutting down due to child request")
		p.Terminate()
		return nil, nil
	}
	log.Warn(fmt.Sprintf("hot restart: unknown request %s", req.Kind))
	return &Message{DidntRecognizeLastMesg: true}, nil
}

// ErrNoParent is returned by the child requests of epoch 0, and after Terminate.
var ErrNoParent = errors.New("no parent process")

// ErrNoReply means the parent did not answer within the reply timeout.
var ErrNoReply = errors.New("parent did not reply")

func (r *Restarter) request(req *Request, wantReply bool) (*Reply, *os.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opts.Epoch == 0 || r.terminated {
		return nil, nil, ErrNoParent
	}
	to := SocketName(r.opts.SocketPath, RoleParent, r.opts.BaseID, r.opts.Epoch-1)
	if err := r.child.send(to, &Message{Request: req}, nil); err != nil {
		return nil, nil, err
	}
	if !wantReply {
		return nil, nil, nil
	}
	deadline := time.Now().Add(r.opts.ReplyTimeout)
	for {
		m, f, err := r.child.recv(deadline)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, nil, fmt.Errorf("%s: %w", req.Kind, ErrNoReply)
			}
			return nil, nil, err
		}
		if m.DidntRecognizeLastMesg {
			closeFile(f)
			return nil, nil, fmt.Errorf("%s: parent did not recognize the request", req.Kind)
		}
		if m.Reply == nil || m.Reply.Kind != req.Kind {
			closeFile(f) // a late reply to an earlier request that timed out
			continue
		}
		return m.Reply, f, nil
	}
}

func closeFile(f *os.File) {
	if f != nil {
		_ = f.Close()
	}
}

// ShutdownAdmin asks the parent to close its admin listener and returns the start time
// of the first epoch.
func (r *Restarter) ShutdownAdmin() (time.Time, error) {
	rep, f, err := r.request(&Request{Kind: KindShutdownAdmin}, true)
	closeFile(f)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(int64(rep.OriginalStartTimeUnixSeconds), 0), nil
}

// PassListenSocket asks the parent for its listen socket bound to address
// ("tcp://127.0.0.1:80"); it returns nil, nil when the parent has none.
func (r *Restarter) PassListenSocket(address string) (*os.File, error) {
	rep, f, err := r.request(&Request{Kind: KindPassListenSocket, Address: address}, true)
	if err != nil {
		return nil, err
	}
	if rep.FD < 0 {
		closeFile(f)
		return nil, nil
	}
	return f, nil
}

// Stats asks the parent for its counter deltas and gauges.
func (r *Restarter) Stats() (*Stats, error) {
	rep, f, err := r.request(&Request{Kind: KindStats}, true)
	closeFile(f)
	if err != nil {
		return nil, err
	}
	if rep.Stats == nil {
		return &Stats{}, nil
	}
	return rep.Stats, nil
}

// DrainListeners tells the parent that this process is live: the parent stops
// accepting and drains. There is no reply.
func (r *Restarter) DrainListeners() error {
	_, _, err := r.request(&Request{Kind: KindDrainListeners}, false)
	return err
}

// Terminate tells the parent to exit; later child requests fail with ErrNoParent.
func (r *Restarter) Terminate() error {
	_, _, err := r.request(&Request{Kind: KindTerminate}, false)
	r.mu.Lock()
	r.terminated = true
	r.mu.Unlock()
	return err
}

// BaseID returns the base id the sockets are named from.
func (r *Restarter) BaseID() uint32 { return r.opts.BaseID }

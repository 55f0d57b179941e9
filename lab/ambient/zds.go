package ambient

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/ambientapi/zds"
)

// ZDS, istio-cni's side: the node agent listens on a unixpacket socket and ztunnel dials
// it. One protobuf message per datagram; every request the agent sends is answered by
// one WorkloadResponse (the ack has no id: only its order ties it to its request).
// ztunnel sends ZdsHello first; the agent answers with an add (and the pod's network
// namespace as an SCM_RIGHTS fd) for every enrolled pod, then snapshot_sent, after which
// ztunnel forgets pods it had that were not in the snapshot. Later pods come as add,
// leave as del. ztunnel never speaks unasked: a message with no request waiting for it,
// or the connection's end, closes it.
//
// Requests are pipelined: istio-cni writes one and reads its ack before the next, and so
// did this agent, but then every pod of an `up` waited for two wake-ups across processes
// in turn (one ~60 ms on a machine at load 20: 6 s of a 100-pod `up`, a minute of a
// 1000-pod one). The agent writes each request as it comes, under the connection's write
// lock, queues a waiter for its ack in the same order, and one reader goroutine hands
// each ack to the oldest waiter. ztunnel, real or ours, reads a request, handles it and
// acks it before it reads the next, so the datagrams on the wire and their order are
// istio-cni's; only the agent does not idle in between. At most maxInFlight requests go
// unacknowledged (the kernel also holds at most net.unix.max_dgram_qlen unread).

// Timing of the protocol, as istio-cni's: how long a write may take, and how long the
// oldest request waits for its ack (each ack restarts the wait of the next).
const ackTimeout = 5 * time.Second

// maxInFlight bounds the requests written and not yet acknowledged.
const maxInFlight = 64

// maxMessage is the largest datagram read; a larger one is a protocol error.
const maxMessage = 1024

// errClosed is a request's answer when the connection ended before its ack.
var errClosed = errors.New("ztunnel's connection closed")

// conn is one ztunnel's connection.
type conn struct {
	u   *net.UnixConn
	log *slog.Logger

	mu     sync.Mutex    // held while a request is written and queued: acks come in this order
	window chan struct{} // one token per request written and not yet acknowledged

	pmu     sync.Mutex
	pending []chan error // waiters for acks, oldest first
	err     error        // why the connection closed, once it did

	closed chan struct{}
	once   sync.Once
	reader chan struct{} // closed when readAcks returns (nil before it starts)
}

func newConn(u *net.UnixConn, log *slog.Logger) *conn {
	return &conn{u: u, log: log, closed: make(chan struct{}), window: make(chan struct{}, maxInFlight)}
}

// close ends the connection; every request still waiting gets errClosed.
func (c *conn) close() { c.fail(errClosed) }

// fail ends the connection for err: every request still waiting gets it.
func (c *conn) fail(err error) {
	c.once.Do(func() {
		c.pmu.Lock()
		c.err = err
		waiting := c.pending
		c.pending = nil
		c.pmu.Unlock()
		close(c.closed)
		c.u.Close()
		for _, w := range waiting {
			w <- err
		}
	})
}

// readHello reads ztunnel's first message.
func (c *conn) readHello() (*zds.ZdsHello, error) {
	var h zds.ZdsHello
	if err := c.read(&h, ackTimeout); err != nil {
		return nil, fmt.Errorf("read ztunnel's hello: %w", err)
	}
	if h.GetVersion() != zds.Version_V1 {
		return nil, fmt.Errorf("ztunnel's hello: version %v, want V1", h.GetVersion())
	}
	return &h, nil
}

// start starts the reader of acks, after the hello.
func (c *conn) start() {
	c.reader = make(chan struct{})
	go func() {
		defer close(c.reader)
		c.readAcks()
	}()
}

// wait waits for the reader to end (after close).
func (c *conn) wait() {
	if c.reader != nil {
		<-c.reader
	}
}

// send sends req (with the namespace fd when fd >= 0) and waits for its ack; an ack that
// carries an error is returned as an error too. Safe for concurrent use: requests of
// several goroutines are in flight at once.
func (c *conn) send(req *zds.WorkloadRequest, fd int) error {
	c.mu.Lock()
	ack, err := c.post(req, fd)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return <-ack
}

// post writes req and queues the waiter its ack is sent to; the caller holds c.mu, which
// keeps the queue in the order of the writes.
func (c *conn) post(req *zds.WorkloadRequest, fd int) (<-chan error, error) {
	data, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode %v: %w", req, err)
	}
	select {
	case c.window <- struct{}{}:
	case <-c.closed:
		return nil, c.closedErr()
	}
	var rights []byte
	if fd >= 0 {
		rights = unix.UnixRights(fd)
	}
	ack := make(chan error, 1)
	// Queued before the write: the ack may come before WriteMsgUnix returns.
	c.pmu.Lock()
	if c.err != nil {
		c.pmu.Unlock()
		<-c.window
		return nil, c.err
	}
	if len(c.pending) == 0 {
		_ = c.u.SetReadDeadline(time.Now().Add(ackTimeout))
	}
	c.pending = append(c.pending, ack)
	c.pmu.Unlock()
	if err := c.u.SetWriteDeadline(time.Now().Add(ackTimeout)); err != nil {
		c.fail(err)
		return nil, err
	}
	if _, _, err := c.u.WriteMsgUnix(data, rights, nil); err != nil {
		err = fmt.Errorf("send to ztunnel: %w", err)
		c.fail(err) // unwritable: this connection is dead, and the queue with it
		return nil, err
	}
	return ack, nil
}

func (c *conn) closedErr() error {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	return c.err
}

// readAcks hands each ack to the oldest waiter until the connection ends: its peer gone,
// an ack late (ackTimeout after the write of the oldest request waiting, or after the
// previous ack) or a message nobody waits for. The read deadline is set only while a
// request waits, so an idle connection lasts.
func (c *conn) readAcks() {
	for {
		var resp zds.WorkloadResponse
		err := c.read(&resp, 0)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.pmu.Lock()
			idle := len(c.pending) == 0
			if !idle {
				c.pmu.Unlock()
				c.fail(fmt.Errorf("wait for ztunnel's ack: %w", err)) // the lock-step is lost
				return
			}
			_ = c.u.SetReadDeadline(time.Time{})
			c.pmu.Unlock()
			continue
		}
		if err != nil {
			select {
			case <-c.closed:
			default:
				c.log.Warn("ztunnel connection", "err", err)
			}
			c.fail(fmt.Errorf("ztunnel's connection: %w", err))
			return
		}
		c.pmu.Lock()
		if len(c.pending) == 0 {
			c.pmu.Unlock()
			c.log.Warn("ztunnel sent a message unasked: closing its connection")
			c.fail(errors.New("ztunnel sent a message unasked"))
			return
		}
		w := c.pending[0]
		c.pending = c.pending[1:]
		if len(c.pending) > 0 {
			_ = c.u.SetReadDeadline(time.Now().Add(ackTimeout))
		} else {
			_ = c.u.SetReadDeadline(time.Time{})
		}
		c.pmu.Unlock()
		<-c.window
		ack := resp.GetAck()
		switch {
		case ack == nil:
			w <- errors.New("ztunnel answered without an ack")
			c.fail(errors.New("ztunnel answered without an ack"))
			return
		case ack.GetError() != "":
			w <- &AckError{Msg: ack.GetError()}
		default:
			w <- nil
		}
	}
}

// AckError is ztunnel's refusal of a request (its ack's error).
type AckError struct{ Msg string }

func (e *AckError) Error() string { return "ztunnel refused: " + e.Msg }

// read reads one datagram into m, within timeout unless it is 0 (then the deadline set
// last holds).
func (c *conn) read(m proto.Message, timeout time.Duration) error {
	if timeout > 0 {
		if err := c.u.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			return err
		}
	}
	var buf [maxMessage]byte
	n, _, flags, _, err := c.u.ReadMsgUnix(buf[:], nil)
	if err != nil {
		return err
	}
	if n == 0 && flags == 0 {
		return net.ErrClosed // the peer closed: a zero-length read on a seqpacket socket
	}
	if flags&unix.MSG_TRUNC != 0 {
		return errors.New("message longer than 1 KiB")
	}
	return proto.Unmarshal(buf[:n], m)
}

// addRequest is the add of pod.
func addRequest(p enrolled) *zds.WorkloadRequest {
	return &zds.WorkloadRequest{Payload: &zds.WorkloadRequest_Add{Add: &zds.AddWorkload{
		Uid: p.uid,
		WorkloadInfo: &zds.WorkloadInfo{
			Name: p.pod.Name, Namespace: p.pod.Namespace, ServiceAccount: p.pod.ServiceAccount,
		},
	}}}
}

// delRequest is the del of uid.
func delRequest(uid string) *zds.WorkloadRequest {
	return &zds.WorkloadRequest{Payload: &zds.WorkloadRequest_Del{Del: &zds.DelWorkload{Uid: uid}}}
}

// snapshotSent ends the snapshot.
var snapshotSent = &zds.WorkloadRequest{Payload: &zds.WorkloadRequest_SnapshotSent{SnapshotSent: &zds.SnapshotSent{}}}

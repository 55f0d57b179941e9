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
// one WorkloadResponse before the next is sent (the ack has no id: only its order ties
// it to its request), so a connection's requests are serialised by its mutex. ztunnel
// sends ZdsHello first; the agent answers with an add (and the pod's network namespace
// as an SCM_RIGHTS fd) for every enrolled pod, then snapshot_sent, after which ztunnel
// forgets pods it had that were not in the snapshot. Later pods come as add, leave as
// del. While idle the agent checks every keepaliveEvery that ztunnel is still there with
// a short read that must time out (ztunnel never speaks unasked).

// Timing of the protocol, as istio-cni's: how long a write or an ack may take, and how
// often an idle connection is checked.
const (
	ackTimeout     = 5 * time.Second
	keepaliveEvery = 5 * time.Second
	aliveProbe     = 10 * time.Millisecond
)

// maxMessage is the largest datagram read; a larger one is a protocol error.
const maxMessage = 1024

// conn is one ztunnel's connection.
type conn struct {
	u   *net.UnixConn
	log *slog.Logger

	mu     sync.Mutex // one request and its ack at a time
	closed chan struct{}
	once   sync.Once
}

func newConn(u *net.UnixConn, log *slog.Logger) *conn {
	return &conn{u: u, log: log, closed: make(chan struct{})}
}

func (c *conn) close() {
	c.once.Do(func() {
		close(c.closed)
		c.u.Close()
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

// send sends req (with the namespace fd when fd >= 0) and waits for its ack; an ack that
// carries an error is returned as an error too. Safe for concurrent use.
func (c *conn) send(req *zds.WorkloadRequest, fd int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sendLocked(req, fd)
}

func (c *conn) sendLocked(req *zds.WorkloadRequest, fd int) error {
	data, err := proto.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode %v: %w", req, err)
	}
	var rights []byte
	if fd >= 0 {
		rights = unix.UnixRights(fd)
	}
	if err := c.u.SetWriteDeadline(time.Now().Add(ackTimeout)); err != nil {
		return err
	}
	if _, _, err := c.u.WriteMsgUnix(data, rights, nil); err != nil {
		c.close() // unwritable: this connection is dead
		return fmt.Errorf("send to ztunnel: %w", err)
	}
	var resp zds.WorkloadResponse
	if err := c.read(&resp, ackTimeout); err != nil {
		c.close() // no ack in time, or garbage: the lock-step is lost
		return fmt.Errorf("wait for ztunnel's ack: %w", err)
	}
	ack := resp.GetAck()
	if ack == nil {
		c.close()
		return errors.New("ztunnel answered without an ack")
	}
	if ack.GetError() != "" {
		return &AckError{Msg: ack.GetError()}
	}
	return nil
}

// AckError is ztunnel's refusal of a request (its ack's error).
type AckError struct{ Msg string }

func (e *AckError) Error() string { return "ztunnel refused: " + e.Msg }

// alive reports whether ztunnel is still connected: a short read times out on a live
// connection; EOF or any message means it is gone or broke the protocol.
func (c *conn) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var resp zds.WorkloadResponse
	err := c.read(&resp, aliveProbe)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	if err == nil {
		c.log.Warn("ztunnel sent a message unasked: closing its connection")
	}
	return false
}

// read reads one datagram into m within timeout.
func (c *conn) read(m proto.Message, timeout time.Duration) error {
	if err := c.u.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return err
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

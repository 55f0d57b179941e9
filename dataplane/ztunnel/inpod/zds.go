// Package inpod is how ztunnel lives inside the pods it serves: the ZDS client that
// receives each enrolled pod's network namespace from the node agent (istio-cni) over a
// unixpacket socket, and the sockets ztunnel opens and dials from inside that namespace
// (every one marked 0x539 so the pod's rules let it through).
package inpod

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/ambientapi/zds"
)

// maxMessage is the largest ZDS datagram read; istio-cni's messages are far smaller
// (ztunnel reads into 1 KiB as well).
const maxMessage = 1024

// Handler is what the ZDS client drives: the workload manager of the ztunnel process.
// Its methods are called from the client's one goroutine, one at a time; the answer of
// each is sent to the node agent as the message's ack, so they should return once the
// pod's sockets exist (or failed), without waiting for its certificate.
type Handler interface {
	// AddPod starts serving pod uid inside netns, which the handler now owns (closes).
	// An add for a uid already served replaces its namespace.
	AddPod(uid string, info *zds.WorkloadInfo, netns *os.File) error
	// KeepPod tells the handler that pod uid, served before a reconnect, is still there.
	KeepPod(uid string) error
	// DelPod stops serving pod uid and closes its sockets.
	DelPod(uid string) error
	// Snapshot ends the replay after a (re)connect: every pod not in sent is gone.
	Snapshot(sent map[string]bool)
}

// Client dials the node agent's ZDS socket and keeps dialling it while ctx lives.
type Client struct {
	Path    string        // required: INPOD_UDS
	Handler Handler       // required
	Log     *slog.Logger  // required
	Backoff time.Duration // optional: wait between connection attempts (default 1s)
}

// Run connects, says hello and serves the node agent's requests, reconnecting after every
// failure until ctx ends (then it returns nil). ztunnel keeps its pods across reconnects:
// the node agent replays them and its snapshot_sent drops what it did not replay.
func (c *Client) Run(ctx context.Context) error {
	backoff := c.Backoff
	if backoff <= 0 {
		backoff = time.Second
	}
	for {
		err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		c.Log.Warn("zds connection ended; reconnecting", "path", c.Path, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}

// session is one connection: hello, then requests answered in lock step.
func (c *Client) session(ctx context.Context) error {
	var d net.Dialer
	raw, err := d.DialContext(ctx, "unixpacket", c.Path)
	if err != nil {
		return fmt.Errorf("dial zds %s: %w", c.Path, err)
	}
	conn := raw.(*net.UnixConn)
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	defer conn.Close()
	if err := write(conn, &zds.ZdsHello{Version: zds.Version_V1}); err != nil {
		return fmt.Errorf("send zds hello: %w", err)
	}
	c.Log.Info("zds connected", "path", c.Path)
	sent := map[string]bool{}
	replaying := true
	for {
		req, fd, err := read(conn)
		if err != nil {
			return err
		}
		ackErr := c.handle(req, fd, sent, &replaying)
		ack := &zds.WorkloadResponse{Payload: &zds.WorkloadResponse_Ack{Ack: &zds.Ack{}}}
		if ackErr != nil {
			c.Log.Warn("zds request failed", "request", req.String(), "err", ackErr)
			ack.GetAck().Error = ackErr.Error()
		}
		if err := write(conn, ack); err != nil {
			return fmt.Errorf("send zds ack: %w", err)
		}
	}
}

// handle applies one request; fd is the netns handed with an add (nil otherwise).
func (c *Client) handle(req *zds.WorkloadRequest, fd *os.File, sent map[string]bool, replaying *bool) error {
	if _, isAdd := req.GetPayload().(*zds.WorkloadRequest_Add); !isAdd && fd != nil {
		_ = fd.Close()
		return errors.New("a file descriptor came with a request that is not an add")
	}
	switch p := req.GetPayload().(type) {
	case *zds.WorkloadRequest_Add:
		uid := p.Add.GetUid()
		if fd == nil {
			return fmt.Errorf("add %s: no network namespace came with it", uid)
		}
		if err := checkNetns(fd); err != nil {
			_ = fd.Close()
			return fmt.Errorf("add %s: %w", uid, err)
		}
		if *replaying {
			sent[uid] = true
		}
		c.Log.Info("zds add", "uid", uid, "name", p.Add.GetWorkloadInfo().GetName(), "namespace", p.Add.GetWorkloadInfo().GetNamespace())
		return c.Handler.AddPod(uid, p.Add.GetWorkloadInfo(), fd)
	case *zds.WorkloadRequest_Keep:
		if !*replaying {
			return fmt.Errorf("keep %s after snapshot_sent", p.Keep.GetUid())
		}
		sent[p.Keep.GetUid()] = true
		return c.Handler.KeepPod(p.Keep.GetUid())
	case *zds.WorkloadRequest_Del:
		c.Log.Info("zds del", "uid", p.Del.GetUid())
		delete(sent, p.Del.GetUid())
		return c.Handler.DelPod(p.Del.GetUid())
	case *zds.WorkloadRequest_SnapshotSent:
		if *replaying {
			*replaying = false
			c.Handler.Snapshot(sent)
		}
		return nil
	default:
		return errors.New("unknown zds request")
	}
}

// read receives one request and the file descriptor that came with it, if any.
func read(conn *net.UnixConn) (*zds.WorkloadRequest, *os.File, error) {
	buf := make([]byte, maxMessage)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, nil, fmt.Errorf("read zds request: %w", err)
	}
	if n == 0 {
		return nil, nil, fmt.Errorf("read zds request: %w", net.ErrClosed)
	}
	var fd *os.File
	if oobn > 0 {
		fds, err := parseRights(oob[:oobn])
		if err != nil {
			return nil, nil, err
		}
		for i, f := range fds {
			if i == 0 {
				fd = os.NewFile(uintptr(f), "netns")
				continue
			}
			_ = unix.Close(f) // a well-behaved agent sends one
		}
	}
	req := &zds.WorkloadRequest{}
	if err := proto.Unmarshal(buf[:n], req); err != nil {
		if fd != nil {
			_ = fd.Close()
		}
		return nil, nil, fmt.Errorf("decode zds request: %w", err)
	}
	return req, fd, nil
}

// parseRights returns the file descriptors of the SCM_RIGHTS messages in oob.
func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("parse zds control message: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func write(conn *net.UnixConn, m proto.Message) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	_, err = conn.Write(b)
	return err
}

// checkNetns reports an error unless f is a network namespace (ioctl NS_GET_NSTYPE), as
// ztunnel refuses anything else the agent might send.
func checkNetns(f *os.File) error {
	t, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_NSTYPE)
	if err != nil {
		return fmt.Errorf("check network namespace: %w", err)
	}
	if t != unix.CLONE_NEWNET {
		return fmt.Errorf("check network namespace: fd is a namespace of type %#x, not a network namespace", t)
	}
	return nil
}

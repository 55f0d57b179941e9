package hotrestart

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

// ErrNoPeer means no process has bound the peer's socket name (ECONNREFUSED or ENOENT
// on send): the parent is gone, or the child is.
var ErrNoPeer = errors.New("no process listens on the peer socket")

// rpcSocket is one bound datagram socket that sends and receives framed messages.
type rpcSocket struct {
	conn *net.UnixConn
	asm  Assembler
}

func bindSocket(name string) (*rpcSocket, error) {
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("bind domain socket %s: %w", name, err)
	}
	return &rpcSocket{conn: c}, nil
}

// send writes m to the socket named to. When f is not nil its fd travels with the
// message as SCM_RIGHTS; such a message must fit in one datagram.
func (s *rpcSocket) send(to string, m *Message, f *os.File) error {
	frames := Frame(Marshal(m))
	addr := &net.UnixAddr{Name: to, Net: "unixgram"}
	for i, d := range frames {
		var oob []byte
		if f != nil {
			if len(frames) > 1 {
				return errors.New("send message: a message carrying an fd must fit one datagram")
			}
			fd, err := rawFD(f)
			if err != nil {
				return fmt.Errorf("send %s to %s: %w", kindOf(m), to, err)
			}
			oob = syscall.UnixRights(fd)
		}
		if _, _, err := s.conn.WriteMsgUnix(d, oob, addr); err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("send %s to %s: %w", kindOf(m), to, ErrNoPeer)
			}
			return fmt.Errorf("send %s to %s (datagram %d): %w", kindOf(m), to, i, err)
		}
	}
	return nil
}

// interrupt makes a recv without a deadline, waiting now or later, return
// os.ErrDeadlineExceeded: a deadline in the past stays until recv is given another.
func (s *rpcSocket) interrupt() { _ = s.conn.SetReadDeadline(time.Unix(1, 0)) }

// recv reads the next whole message, waiting until deadline; a zero deadline leaves the
// socket's read deadline as it is (none, unless interrupt set one). A file received as
// SCM_RIGHTS is returned with it (the caller owns it).
func (s *rpcSocket) recv(deadline time.Time) (*Message, *os.File, error) {
	if !deadline.IsZero() {
		if err := s.conn.SetReadDeadline(deadline); err != nil {
			return nil, nil, fmt.Errorf("set read deadline: %w", err)
		}
	}
	buf := make([]byte, MaxDatagram)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	var file *os.File
	for {
		n, oobn, _, _, err := s.conn.ReadMsgUnix(buf, oob)
		if err != nil {
			if file != nil {
				_ = file.Close()
			}
			return nil, nil, fmt.Errorf("receive message: %w", err)
		}
		if f := filesFrom(oob[:oobn]); f != nil {
			if file != nil {
				_ = file.Close()
			}
			file = f
		}
		payload, done, err := s.asm.Add(buf[:n])
		if err != nil {
			continue // a broken message is dropped; the next datagram starts afresh
		}
		if !done {
			continue
		}
		m, err := Unmarshal(payload)
		if err != nil {
			if file != nil {
				_ = file.Close()
			}
			return nil, nil, err
		}
		return m, file, nil
	}
}

// filesFrom returns the first fd of an SCM_RIGHTS control message as a file and closes
// any others.
func filesFrom(oob []byte) *os.File {
	if len(oob) == 0 {
		return nil
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var out *os.File
	for _, cm := range msgs {
		fds, err := syscall.ParseUnixRights(&cm)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if out == nil {
				syscall.CloseOnExec(fd)
				out = os.NewFile(uintptr(fd), "hot-restart-socket")
				continue
			}
			_ = syscall.Close(fd)
		}
	}
	return out
}

func (s *rpcSocket) close() error { return s.conn.Close() }

func kindOf(m *Message) string {
	switch {
	case m.Request != nil:
		return "request " + m.Request.Kind.String()
	case m.Reply != nil:
		return "reply " + m.Reply.Kind.String()
	}
	return "message"
}

// rawFD returns f's descriptor without os.File.Fd's side effect. Fd puts the descriptor
// in blocking mode, and a listen socket's mode belongs to the file description that the
// hot restart parent and child share: an accept in either would then wait in the kernel,
// where closing the listener cannot wake it, and the parent's drain (which closes its
// listeners) hung until the next connection came.
func rawFD(f *os.File) (int, error) {
	sc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if err := sc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return -1, err
	}
	return fd, nil
}

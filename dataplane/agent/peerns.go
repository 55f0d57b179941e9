package agent

import (
	"fmt"
	"log/slog"
	"net"

	"golang.org/x/sys/unix"
)

// sameNetNSListener accepts only unix socket peers in the agent's own network namespace:
// the proxies of every pod run as uid 1337 and share the host's filesystem, so file
// modes let pod A's proxy open pod B's sds.sock; the kernel's SO_PEERCRED pid and its
// /proc/<pid>/ns/net tell them apart, since each pod has its own network namespace. A
// peer elsewhere is closed before it can send a request, and logged.
type sameNetNSListener struct {
	net.Listener
	dev, ino uint64 // the agent's network namespace
	log      *slog.Logger
}

// onlySameNetNS wraps ln (a unix listener) with the check.
func onlySameNetNS(ln net.Listener, log *slog.Logger) (net.Listener, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return nil, fmt.Errorf("stat own network namespace: %w", err)
	}
	return &sameNetNSListener{Listener: ln, dev: st.Dev, ino: st.Ino, log: log}, nil
}

// Accept returns the next connection whose peer is in the agent's network namespace.
func (l *sameNetNSListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		pid, ok := l.peerInNetNS(c)
		if ok {
			return c, nil
		}
		l.log.Warn("sds connection refused: the peer is not in this pod's network namespace", "pid", pid)
		c.Close()
	}
}

// peerInNetNS reports the peer's pid and whether it is in the listener's namespace.
func (l *sameNetNSListener) peerInNetNS(c net.Conn) (int32, bool) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var (
		cred *unix.Ucred
		gerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || gerr != nil {
		return 0, false
	}
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", cred.Pid), &st); err != nil {
		return cred.Pid, false
	}
	return cred.Pid, st.Dev == l.dev && st.Ino == l.ino
}

package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// newNcCmd is `meshlab nc`, the nc of the busybox in the curl image (curlimages/curl,
// Istio's sleep and curl samples): `meshlab exec` runs it for `nc` in a pod of that
// image, as the TCP traffic shifting task runs `kubectl exec $SLEEP -c sleep -- sh -c
// "(date; sleep 1) | nc $INGRESS_HOST $TCP_INGRESS_PORT"`. As busybox's client it
// connects, copies stdin to the connection and, at stdin's end, closes its sending half
// (so the server sees the end and closes) while it copies what comes back to stdout until
// the server closes.
func newNcCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "nc [-w SECS] HOST PORT",
		Short:              "busybox's nc client (internal; meshlab exec runs it in a curl or sleep pod)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return netcat(args, os.Stdin, os.Stdout)
		},
	}
}

// netcat runs nc's client with busybox's arguments: [-w SECS] HOST PORT, -w bounding the
// connect and each wait for data.
func netcat(args []string, in io.Reader, out io.Writer) error {
	var timeout time.Duration
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-w" && i+1 < len(args):
			s, err := strconv.Atoi(args[i+1])
			if err != nil || s < 0 {
				return fmt.Errorf("nc: invalid number '%s'", args[i+1])
			}
			timeout = time.Duration(s) * time.Second
			i++
		case strings.HasPrefix(a, "-") && a != "-":
			return fmt.Errorf("nc: option %s is not supported here (meshlab's nc is busybox's client: [-w SECS] HOST PORT)", a)
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) != 2 {
		return errors.New("usage: nc [-w SECS] HOST PORT")
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(rest[0], rest[1]), cmpDuration(timeout, 30*time.Second))
	if err != nil {
		return fmt.Errorf("nc: %w", err)
	}
	defer conn.Close()
	sent := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, in)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		sent <- err
	}()
	var src io.Reader = conn
	if timeout > 0 {
		src = &deadlineReader{conn: conn, timeout: timeout}
	}
	if _, err := io.Copy(out, src); err != nil {
		return fmt.Errorf("nc: %w", err)
	}
	select {
	case err := <-sent:
		if err != nil {
			return fmt.Errorf("nc: %w", err)
		}
	default: // the server closed first; what stdin still holds is not sent
	}
	return nil
}

func cmpDuration(d, otherwise time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return otherwise
}

// deadlineReader reads conn with a fresh deadline of timeout before each read.
type deadlineReader struct {
	conn    net.Conn
	timeout time.Duration
}

func (r *deadlineReader) Read(p []byte) (int, error) {
	if err := r.conn.SetReadDeadline(time.Now().Add(r.timeout)); err != nil {
		return 0, err
	}
	return r.conn.Read(p)
}

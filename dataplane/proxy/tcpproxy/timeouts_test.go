package tcpproxy

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/internal/testutil"
)

// proxied serves one connection through cfg and returns the client end and a channel
// closed when Serve returned.
func proxied(t *testing.T, cfg *Config, store *stats.Store, upstream string) (net.Conn, <-chan struct{}) {
	t.Helper()
	cm := cluster.NewManager(store)
	t.Cleanup(cm.Close)
	cm.AddStatic([]*cluster.Config{staticCluster(t, cfg.Cluster, upstream)})
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer server.Close()
		Serve(context.Background(), cfg, Deps{Clusters: cm, Stats: store, Logger: testutil.Logger(t)}, server, Downstream{})
	}()
	t.Cleanup(func() { client.Close(); <-done })
	return client, done
}

func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("echo %q, %v", buf, err)
	}
}

func TestIdleTimeoutClosesOnlyAnIdleConnection(t *testing.T) {
	store := stats.NewStore()
	// The timeout is long against the gaps between round trips (20ms), so that a loaded
	// machine's scheduling delays cannot make a busy connection look idle; the traffic
	// lasts three timeouts.
	const idle = 500 * time.Millisecond
	c, done := proxied(t, &Config{StatPrefix: "idle", Cluster: "echo", IdleTimeout: idle}, store, testutil.EchoServer(t).String())
	for start := time.Now(); time.Since(start) < 3*idle; {
		roundTrip(t, c, "ping")
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("a busy connection was closed by the idle timeout")
	default:
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("an idle connection stayed open")
	}
	if got := store.Value("tcp.idle.idle_timeout"); got != 1 {
		t.Errorf("tcp.idle.idle_timeout = %d, want 1", got)
	}
}

func TestMaxDownstreamConnectionDurationClosesABusyConnection(t *testing.T) {
	store := stats.NewStore()
	c, done := proxied(t, &Config{StatPrefix: "dur", Cluster: "echo", MaxDuration: 200 * time.Millisecond}, store, testutil.EchoServer(t).String())
	start := time.Now()
	for {
		select {
		case <-done:
			if d := time.Since(start); d < 150*time.Millisecond || d > 3*time.Second {
				t.Errorf("closed after %v, want about 200ms", d)
			}
			if got := store.Value("tcp.dur.max_downstream_connection_duration"); got != 1 {
				t.Errorf("max_downstream_connection_duration = %d, want 1", got)
			}
			return
		default:
		}
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := io.WriteString(c, "x"); err == nil {
			buf := make([]byte, 1)
			_, _ = io.ReadFull(c, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

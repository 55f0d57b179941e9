package cluster

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestAbortInterruptsTheExchange: an exchange armed through an Abort is interrupted
// when the hook fires (the downstream client went away), reports the request's
// context error, and closes its connection; a hook fired before the exchange starts
// refuses it (context.Canceled); a Reset hook serves the next request, whose exchange completes and
// returns its connection to the pool.
func TestAbortInterruptsTheExchange(t *testing.T) {
	release := make(chan struct{})
	srv, conns := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
	defer close(release)
	p := newH1Pool((&net.Dialer{}).DialContext, 4, time.Minute)
	defer p.closeIdle()
	var abort Abort
	noConn := func(net.Conn) {}

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+srv.Listener.Addr().String()+"/slow", nil)
	errc := make(chan error, 1)
	go func() {
		_, err := p.roundTrip(req, noConn, &abort)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond) // the request reached the upstream
	cancel()
	abort.Fire()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted exchange: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the exchange was not interrupted when the hook fired")
	}

	req2, _ := http.NewRequest(http.MethodGet, "http://"+srv.Listener.Addr().String()+"/", nil)
	if _, err := p.roundTrip(req2, noConn, &abort); !errors.Is(err, context.Canceled) {
		t.Fatalf("an exchange on a fired hook: %v, want context.Canceled", err)
	}

	abort.Reset()
	req3, _ := http.NewRequest(http.MethodGet, "http://"+srv.Listener.Addr().String()+"/", nil)
	resp, err := p.roundTrip(req3, noConn, &abort)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	n, _ := resp.Body.Read(buf)
	for err == nil {
		_, err = resp.Body.Read(buf[n:])
	}
	if string(buf[:n]) != "ok" || len(p.idle) != 1 {
		t.Fatalf("after a Reset: body %q, %d idle keys; want ok and the connection back in the pool", buf[:n], len(p.idle))
	}
	if abort.fn != nil {
		t.Error("the hook still holds the finished exchange's interrupt")
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections dialed, want 3 (the interrupted one and the refused one closed, one for the last)", n)
	}
}

// TestFireGenerationFiresOnlyItsRequest: the route timeout's timer fires the hook for the
// request it was set for (its exchange is interrupted), and nothing once the connection
// serves the next request (a timer that ran late must not end another request).
func TestFireGenerationFiresOnlyItsRequest(t *testing.T) {
	var abort Abort
	interrupted := 0
	gen := abort.Generation()
	if !abort.set(func() { interrupted++ }) {
		t.Fatal("a fresh hook refused an exchange")
	}
	abort.FireGeneration(gen)
	if interrupted != 1 || abort.clear() {
		t.Fatalf("FireGeneration of the request served: %d interrupts, fired %v; want 1 and fired", interrupted, !abort.clear())
	}
	abort.Reset()
	if !abort.set(func() { interrupted++ }) {
		t.Fatal("the next request's exchange was refused after a Reset")
	}
	abort.FireGeneration(gen) // the earlier request's timer, late
	if interrupted != 1 || !abort.clear() {
		t.Errorf("FireGeneration of an earlier request: %d interrupts, want 1 (the next request untouched)", interrupted)
	}
}

// TestInterruptEndsOneAttempt: a per-try timeout's Interrupt ends the exchange of its
// attempt (the attempt's context ended first) without cancelling the request, so the
// retry's exchange on the same hook runs to its answer; an attempt whose context ended
// before its exchange was armed (the timer found nothing to interrupt) is refused at
// once rather than left waiting for an upstream that does not answer.
func TestInterruptEndsOneAttempt(t *testing.T) {
	release := make(chan struct{})
	srv, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
	defer close(release)
	p := newH1Pool((&net.Dialer{}).DialContext, 4, time.Minute)
	defer p.closeIdle()
	var abort Abort
	noConn := func(net.Conn) {}
	base := "http://" + srv.Listener.Addr().String()
	roundTrip := func(ctx context.Context, path string) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		resp, err := p.roundTrip(req, noConn, &abort)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	try1, end1 := context.WithCancelCause(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := roundTrip(try1, "/slow")
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond) // the request reached the upstream
	end1(context.DeadlineExceeded)
	abort.Interrupt(abort.Generation())
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted attempt: %v, want its context's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the attempt's exchange was not interrupted")
	}
	if body, err := roundTrip(context.Background(), "/"); err != nil || body != "ok" {
		t.Fatalf("the retry after an Interrupt: %q, %v; want ok (the request was not cancelled)", body, err)
	}

	abort.Interrupt(abort.Generation() - 1) // an earlier request's timer, late: nothing
	try3, end3 := context.WithCancelCause(context.Background())
	end3(context.DeadlineExceeded) // the timer ran out before the exchange was armed
	done := make(chan error, 1)
	go func() {
		_, err := roundTrip(try3, "/slow")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("an attempt whose context ended before its exchange: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an attempt whose context ended before its exchange was armed waited for the upstream")
	}
	if abort.fn != nil {
		t.Error("the hook still holds a finished exchange's interrupt")
	}
}

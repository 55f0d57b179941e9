package agent

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// sdsAckTimeout bounds how long a renewal waits for the proxies to ACK the new secrets.
const sdsAckTimeout = 5 * time.Second

// sdsAcks records, per open SDS stream, the last secret version the proxy ACKed, so that
// a renewal can answer once every proxy applied the new certificate and trust bundle (a
// root rotation must not go on before). Safe for concurrent use.
type sdsAcks struct {
	mu      sync.Mutex
	streams map[*sdsStream]string
	changed chan struct{} // closed and replaced on every change
}

// sdsStream is one open SDS stream, as sdsAcks knows it.
type sdsStream struct{}

func newSDSAcks() *sdsAcks {
	return &sdsAcks{streams: map[*sdsStream]string{}, changed: make(chan struct{})}
}

func (a *sdsAcks) bump() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// open registers a stream; close it with closeStream.
func (a *sdsAcks) open() *sdsStream {
	s := &sdsStream{}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.streams[s] = ""
	a.bump()
	return s
}

func (a *sdsAcks) closeStream(s *sdsStream) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.streams, s)
	a.bump()
}

// ack records that s's proxy ACKed version.
func (a *sdsAcks) ack(s *sdsStream, version string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.streams[s]; ok {
		a.streams[s] = version
		a.bump()
	}
}

// wait blocks until every open stream has ACKed the version current returns (at once when
// none is open; asked again on every change, in case a newer certificate replaced it) and
// returns how many streams there were; an error when ctx ends or sdsAckTimeout passes.
func (a *sdsAcks) wait(ctx context.Context, current func() string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, sdsAckTimeout)
	defer cancel()
	for {
		version := current()
		a.mu.Lock()
		pending, n := 0, len(a.streams)
		for _, v := range a.streams {
			if v != version {
				pending++
			}
		}
		changed := a.changed
		a.mu.Unlock()
		if pending == 0 {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("wait for the proxy to apply secret version %s: %d of %d sds streams did not ACK it: %w", version, pending, n, ctx.Err())
		case <-changed:
		}
	}
}

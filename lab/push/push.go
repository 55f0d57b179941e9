// Package push is the lab's push queue: an apply or delete returns once its objects are
// validated and stored (kubectl's meaning of apply: the API server has the object, the
// controllers act after), and the proxies' new config is generated and handed to the
// discovery server here, after it, one push at a time and in the order the changes were
// stored. A change stored while an older one is still waiting replaces it (each push
// carries the whole model, so the newest one covers the older: istiod's debounce merges
// changes the same way, without its wait). Flush waits for the pushes of every change
// stored before it, which is what readers of the proxies' state (proxy-status, history)
// and `apply --wait` need.
package push

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Func pushes one stored change to the proxies; trigger names what it carries (several
// applies' triggers when changes were merged).
type Func func(ctx context.Context, trigger string) error

// Queue runs pushes in the background, in order. Its zero value is ready to use; it
// is safe for concurrent use.
type Queue struct {
	mu      sync.Mutex
	stored  uint64 // changes stored so far
	pushed  uint64 // changes whose push has run (failed or not)
	next    *pending
	running bool
	err     error         // the last push's error
	done    chan struct{} // closed when pushed moves, then replaced
}

// pending is the newest stored change whose push has not begun.
type pending struct {
	gen     uint64
	trigger string
	push    Func
}

// Store queues push, the push of the change numbered by the returned generation, and
// returns at once. A push still waiting is dropped for it: push must carry everything
// the dropped one did (the whole current model), and trigger is appended to the dropped
// one's. Pushes run without a deadline, outside any caller's context: a client that goes
// away does not leave the proxies half pushed.
func (q *Queue) Store(trigger string, push Func) uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stored++
	if q.next != nil {
		trigger = mergeTriggers(q.next.trigger, trigger)
	}
	q.next = &pending{gen: q.stored, trigger: trigger, push: push}
	if !q.running {
		q.running = true
		go q.run()
	}
	return q.stored
}

// mergeTriggers joins the triggers of two merged changes; the history shows the result
// beside the version the push makes. A trigger the merged ones end with already is not
// repeated: the node agent's annotations of many pods at once are one "ambient".
func mergeTriggers(older, newer string) string {
	if older == newer || strings.HasSuffix(older, "; "+newer) {
		return older
	}
	const prefix = "apply: "
	if o, ok := strings.CutPrefix(older, prefix); ok {
		if n, ok := strings.CutPrefix(newer, prefix); ok {
			return prefix + o + ", " + n
		}
	}
	return older + "; " + newer
}

func (q *Queue) run() {
	for {
		q.mu.Lock()
		p := q.next
		if p == nil {
			q.running = false
			q.mu.Unlock()
			return
		}
		q.next = nil
		q.mu.Unlock()

		err := p.push(context.Background(), p.trigger)

		q.mu.Lock()
		q.pushed, q.err = p.gen, err
		if q.done != nil {
			close(q.done)
			q.done = nil
		}
		q.mu.Unlock()
	}
}

// Flush waits until the push of every change stored before it was called has run and
// returns the error of the last push run by then (nil when it succeeded), or ctx's
// error. With nothing stored it returns at once.
func (q *Queue) Flush(ctx context.Context) error {
	q.mu.Lock()
	want := q.stored
	for q.pushed < want {
		if q.done == nil {
			q.done = make(chan struct{})
		}
		done := q.done
		q.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
		q.mu.Lock()
	}
	err := q.err
	q.mu.Unlock()
	return err
}

// Settle is Flush for readers of the proxies' state: it waits at most d and ignores
// the pushes' errors (whoever stored the change hears of them).
func (q *Queue) Settle(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = q.Flush(ctx)
}

// Pending reports whether a stored change has not been pushed yet.
func (q *Queue) Pending() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pushed < q.stored
}

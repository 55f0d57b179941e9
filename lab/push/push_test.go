package push

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorder is a push target that records the triggers it was pushed, holding each push
// until released when gate is set.
type recorder struct {
	mu       sync.Mutex
	triggers []string
	gate     chan struct{}
	started  chan string
}

func (r *recorder) push(err error) Func {
	return func(_ context.Context, trigger string) error {
		if r.started != nil {
			r.started <- trigger
		}
		if r.gate != nil {
			<-r.gate
		}
		r.mu.Lock()
		r.triggers = append(r.triggers, trigger)
		r.mu.Unlock()
		return err
	}
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.triggers)
}

func TestFlushWaitsForThePushOfEveryStoredChange(t *testing.T) {
	t.Parallel()
	var q Queue
	if err := q.Flush(t.Context()); err != nil || q.Pending() {
		t.Fatalf("Flush of an empty queue: %v, pending %v", err, q.Pending())
	}
	r := &recorder{gate: make(chan struct{}), started: make(chan string, 4)}
	q.Store("apply: a", r.push(nil))
	if got := <-r.started; got != "apply: a" {
		t.Fatalf("first push carries %q", got)
	}
	// b and c come while a is being pushed: one push carries both, after a.
	q.Store("apply: b", r.push(nil))
	q.Store("apply: c", r.push(errors.New("boom")))
	if !q.Pending() {
		t.Fatal("not pending while pushes wait")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := q.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush before the pushes ran: %v, want the context's deadline", err)
	}
	close(r.gate)
	if err := q.Flush(t.Context()); err == nil || err.Error() != "boom" {
		t.Fatalf("Flush after a failed push: %v, want its error", err)
	}
	if got, want := r.got(), []string{"apply: a", "apply: b, c"}; !slices.Equal(got, want) {
		t.Fatalf("pushes %q, want %q", got, want)
	}
	if q.Pending() {
		t.Fatal("pending after Flush")
	}
	// A later push that succeeds clears the error.
	q.Store("apply: d", r.push(nil))
	if err := q.Flush(t.Context()); err != nil {
		t.Fatalf("Flush after a good push: %v", err)
	}
}

func TestMergeTriggers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ older, newer, want string }{
		{"apply: VirtualService default/a created", "apply: DestinationRule default/b configured", "apply: VirtualService default/a created, DestinationRule default/b configured"},
		{"start", "apply: x", "start; apply: x"},
		{"ambient", "ambient", "ambient"},
		{"apply: x; ambient", "ambient", "apply: x; ambient"},
		{"ambient", "apply: x", "ambient; apply: x"},
	} {
		if got := mergeTriggers(c.older, c.newer); got != c.want {
			t.Errorf("mergeTriggers(%q, %q) = %q, want %q", c.older, c.newer, got, c.want)
		}
	}
}

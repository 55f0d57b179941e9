package web

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
)

// fakeSync answers WaitSynced with err, or waits for ctx's end when block is set.
type fakeSync struct {
	err   error
	block bool
}

func (f fakeSync) WaitSynced(ctx context.Context) error {
	if f.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.err
}

func TestSyncRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if err := serveUnix(t, SyncRoutes(fakeSync{})).WaitSynced(ctx, time.Second); err != nil {
		t.Errorf("synced lab: %v", err)
	}
	err := serveUnix(t, SyncRoutes(fakeSync{err: errors.New("generate proxy config: too large")})).WaitSynced(ctx, time.Second)
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "too large") {
		t.Errorf("failed push: %v, want a 409 with its error", err)
	}
	err = serveUnix(t, SyncRoutes(fakeSync{block: true})).WaitSynced(ctx, 50*time.Millisecond)
	if !errors.Is(err, api.ErrTimeout) {
		t.Errorf("a lab that never syncs: %v, want a 504", err)
	}
}

package netns

import (
	"fmt"
	"strings"
	"sync"
)

var _ kernel = (*recordingKernel)(nil)

// recordingKernel is the fake kernel: it records every step and can fail one of them.
type recordingKernel struct {
	mu     sync.Mutex
	steps  []step
	failAt int // 1-based index of the step that fails; 0 never fails
	err    error
}

func (k *recordingKernel) apply(s step) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.steps = append(k.steps, s)
	if k.failAt == len(k.steps) {
		return k.err
	}
	return nil
}

// text renders the recorded steps one per line, as iproute2 commands.
func (k *recordingKernel) text() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var b strings.Builder
	for _, s := range k.steps {
		b.WriteString(s.String())
		b.WriteByte('\n')
	}
	return b.String()
}

var _ batchKernel = (*batchingKernel)(nil)

// batchingKernel is the fake of a kernel that takes runs of steps in one namespace at
// once: it records which steps came together, and can fail one of them as a batch does.
type batchingKernel struct {
	recordingKernel
	batches []int // the number of steps of each apply or applyAll, in order
}

func (k *batchingKernel) apply(s step) error {
	k.batches = append(k.batches, 1)
	return k.recordingKernel.apply(s)
}

func (k *batchingKernel) applyAll(steps []step) error {
	k.batches = append(k.batches, len(steps))
	for _, s := range steps {
		if err := k.recordingKernel.apply(s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

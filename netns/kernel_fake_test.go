package netns

import (
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

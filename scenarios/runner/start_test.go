package runner

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
)

// TestWriteStep: a step prints for a terminal with its shell block indented and without
// the Markdown fences, and a failed setup says so.
func TestWriteStep(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	WriteStep(&b, api.GuideState{Step: 2, Steps: 3, StepName: "shift", Instructions: "Send half.\n```sh\nmeshlab apply -f -\n```\nThen check.\n", Error: "apply: boom"})
	want := "\nStep 2 of 3: shift\n\nSend half.\n    meshlab apply -f -\nThen check.\n\nThe step's setup failed: apply: boom\n"
	if b.String() != want {
		t.Errorf("printed\n%q\nwant\n%q", b.String(), want)
	}
}

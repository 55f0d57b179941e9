package netns

import (
	"testing"
	"time"
)

// testNames returns a name prefix unique to this test ("ml-t1a2b3c-") and registers a
// cleanup that deletes every namespace under it, even if the test fails half-way.
func testNames(t *testing.T) string {
	t.Helper()
	prefix := "ml-" + uniqueName(t) + "-"
	t.Cleanup(func() {
		names, err := List(prefix)
		if err != nil {
			t.Errorf("list namespaces: %v", err)
		}
		for _, n := range names {
			if err := Delete(n); err != nil {
				t.Errorf("delete %s: %v", n, err)
			}
		}
	})
	return prefix
}

// eventually polls cond every 10ms until it is true or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

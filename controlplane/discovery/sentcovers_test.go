package discovery

import "testing"

// TestSentCoversLaterSnapshot: a type whose resources last changed in v1 is synced by a
// response of v3 (a delta proxy that subscribed after v3 changed only its endpoints is
// sent its clusters stamped v3), not by one of an earlier version, and versions not of
// this server's form only by equality. Before, Synced and WaitSynced wanted v1 exactly,
// and apply --wait timed out on a waypoint whose endpoints changed before it subscribed.
func TestSentCoversLaterSnapshot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sent, want string
		ok         bool
	}{
		{"v1", "v1", true},
		{"v3", "v1", true},
		{"v10", "v9", true},
		{"v2", "v3", false},
		{"v9", "v10", false},
		{"2026-11-30T00:00:00Z/7", "2026-11-30T00:00:00Z/7", true},
		{"2026-11-30T00:00:00Z/8", "2026-11-30T00:00:00Z/7", false},
		{"v3", "x1", false},
		{"vx", "v1", false},
	} {
		if got := sentCovers(tc.sent, tc.want); got != tc.ok {
			t.Errorf("sentCovers(%q, %q) = %v, want %v", tc.sent, tc.want, got, tc.ok)
		}
		st := TypeStatus{Sent: tc.sent, Acked: tc.sent, Want: tc.want}
		if st.Synced() != tc.ok {
			t.Errorf("%+v: Synced() = %v, want %v", st, st.Synced(), tc.ok)
		}
	}
}

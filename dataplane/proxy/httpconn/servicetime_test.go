package httpconn

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestServiceTimeValues: x-envoy-upstream-service-time is the upstream's whole
// milliseconds, from the shared values below 100 ms and a value of its own above, and a
// later Add to a response's field leaves the shared value as it was.
func TestServiceTimeValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0"}, {999 * time.Microsecond, "0"}, {7 * time.Millisecond, "7"},
		{99*time.Millisecond + 999*time.Microsecond, "99"}, {100 * time.Millisecond, "100"}, {2500 * time.Millisecond, "2500"},
	} {
		if got := serviceTime(tc.d); !slices.Equal(got, []string{tc.want}) {
			t.Errorf("serviceTime(%v) = %q, want [%s]", tc.d, got, tc.want)
		}
	}
	h := http.Header{"X-Envoy-Upstream-Service-Time": serviceTime(5 * time.Millisecond)}
	h.Add("X-Envoy-Upstream-Service-Time", "6")
	if got := serviceTime(5 * time.Millisecond); !slices.Equal(got, []string{"5"}) {
		t.Errorf("after an Add to a response's field, the shared value is %q, want [5]", got)
	}
}

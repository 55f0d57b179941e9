package tracing

import (
	"net/http"
	"testing"
	"time"
)

// FuzzStart feeds Start a request's B3 headers: whatever they hold, the span has valid
// ids and what it injects is a B3 context the next hop reads back as the same trace.
func FuzzStart(f *testing.F) {
	f.Add("463ac35c9f6413ad48485a3953bb6124", "a2fb4a1d1a96d312", "0020000000000001", "1", "")
	f.Add("a2fb4a1d1a96d312", "a2fb4a1d1a96d312", "", "0", "1")
	f.Add("zz", "", "", "true", "")
	f.Fuzz(func(t *testing.T, traceID, spanID, parent, sampled, flags string) {
		h := http.Header{}
		for k, v := range map[string]string{HeaderTraceID: traceID, HeaderSpanID: spanID, HeaderParentSpanID: parent, HeaderSampled: sampled, HeaderFlags: flags} {
			if v != "" {
				h.Set(k, v)
			}
		}
		for _, shared := range []bool{false, true} {
			z := &Zipkin{TraceID128: true, SharedSpanContext: shared}
			s := z.Start(h, KindServer, "op", false, time.Now())
			if !validID(s.TraceID, true) || !validID(s.ID, false) {
				t.Fatalf("span ids %q %q from %v", s.TraceID, s.ID, h)
			}
			out := http.Header{}
			s.Inject(out)
			next := z.Start(out, KindClient, "op", !s.Sampled, time.Now())
			if next.TraceID != s.TraceID || next.ParentID != s.ID || next.Sampled != s.Sampled {
				t.Fatalf("next hop %+v does not continue %+v", next, s)
			}
		}
	})
}

func TestStartSharedSpanContext(t *testing.T) {
	h := http.Header{}
	h.Set(HeaderTraceID, "463ac35c9f6413ad48485a3953bb6124")
	h.Set(HeaderSpanID, "a2fb4a1d1a96d312")
	h.Set(HeaderParentSpanID, "0020000000000001")
	shared := (&Zipkin{SharedSpanContext: true}).Start(h, KindServer, "op", true, time.Now())
	if shared.ID != "a2fb4a1d1a96d312" || shared.ParentID != "0020000000000001" || !shared.Shared {
		t.Errorf("shared_span_context server span %+v, want the client's span id and parent", shared)
	}
	own := (&Zipkin{SharedSpanContext: false}).Start(h, KindServer, "op", true, time.Now())
	if own.ID == "a2fb4a1d1a96d312" || own.ParentID != "a2fb4a1d1a96d312" || own.Shared {
		t.Errorf("server span without shared_span_context %+v, want a new id, child of the client's", own)
	}
}

package lua

import "testing"

// BenchmarkParityScript is one request through the page's parity script: the request
// phase (a header read, dynamic metadata set) and the response phase (metadata read, a
// header added), each in a fresh coroutine of a pooled state, as the proxy runs them.
func BenchmarkParityScript(b *testing.B) {
	a := compileInline(b, parityScript)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s := &Stream{Protocol: "HTTP/1.1"}
		a.OnRequest(s, request("X-Number", "7"))
		resp := response()
		a.OnResponse(s, resp)
		if resp.Header.Get("x-parity") != "odd" {
			b.Fatal("no x-parity")
		}
	}
}

// BenchmarkParityScriptParallel is BenchmarkParityScript from GOMAXPROCS goroutines at
// once: phases take states from the pool and never share one.
func BenchmarkParityScriptParallel(b *testing.B) {
	a := compileInline(b, parityScript)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s := &Stream{Protocol: "HTTP/1.1"}
			a.OnRequest(s, request("X-Number", "7"))
			a.OnResponse(s, response())
		}
	})
}

package fortio

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxEchoDelay caps the echo's delay= argument, as fortio's -max-echo-delay default does.
const maxEchoDelay = 1500 * time.Millisecond

// maxPayloadSize caps the echo's size= argument, as fortio's -maxpayloadsizekb default
// (256 KiB) does.
const maxPayloadSize = 256 * 1024

// payload is the pseudo-random body size= answers with (fortio's fnet.Payload), made on
// first use rather than at package initialisation: every process of the binary links
// this package, and only a fortio server asked for a size= reply needs it.
var payload = sync.OnceValue(func() []byte {
	b := make([]byte, maxPayloadSize)
	r := rand.NewChaCha8([32]byte{'f', 'o', 'r', 't', 'i', 'o'})
	_, _ = r.Read(b)
	return b
})

// EchoHandler is fortio's echo server handler (fhttp.EchoHandler) for what Istio's tasks
// and the lab's tests use: it answers any path with the request body echoed back (and
// the request's Content-Type and Content-Length), shaped by fortio's query arguments:
//
//   - status=503, or status=503:20,429:10 (20 % 503, 10 % 429, else 200); bad input: 400
//   - delay=100ms, or delay=10ms:50,1s:5 (capped at 1.5 s, as fortio's default cap)
//   - size=1024, or size=512:20,16384:10: a pseudo-random body of that many bytes instead
//     of the echo (capped at 256 KiB)
//   - close=true or close=25 (percent): answer with Connection: close
//   - header=Name:Value (repeatable): add that response header
//
// fortio's gzip= and its debug-mode x-fortio-id are not served.
func EchoHandler(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if d := pickDelay(q.Get("delay")); d > 0 {
		time.Sleep(d)
	}
	if probability(q.Get("close")) {
		w.Header().Set("Connection", "close")
	}
	for _, hdr := range q["header"] {
		name, value, ok := strings.Cut(hdr, ":")
		if !ok || name == "" {
			continue // fortio logs "invalid extra header" and goes on
		}
		w.Header().Add(name, value)
	}
	status := http.StatusOK
	if s := q.Get("status"); s != "" {
		status = pickStatus(s)
	}
	size := pickSize(q.Get("size"))
	data, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if size >= 0 {
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/octet-stream")
		}
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.WriteHeader(status)
		_, _ = w.Write(payload()[:size])
		return
	}
	for _, k := range []string{"Content-Type", "Content-Length"} {
		if v := r.Header.Get(k); v != "" && w.Header().Get(k) == "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// weighted parses fortio's "value" or "value:percent,value:percent" argument forms. A
// single value (no colon) has weight 100. It returns the values and their cumulative
// percentages, or an error for a malformed entry or percentages above 100 in sum.
func weighted[T any](arg string, parse func(string) (T, error)) ([]T, []float64, error) {
	if !strings.ContainsRune(arg, ':') && !strings.ContainsRune(arg, ',') {
		v, err := parse(arg)
		if err != nil {
			return nil, nil, err
		}
		return []T{v}, []float64{100}, nil
	}
	var vals []T
	var cum []float64
	total := 0.0
	for entry := range strings.SplitSeq(arg, ",") {
		vs, ps, ok := strings.Cut(entry, ":")
		if !ok {
			return nil, nil, fmt.Errorf("entry %q: want value:percent", entry)
		}
		v, err := parse(vs)
		if err != nil {
			return nil, nil, fmt.Errorf("entry %q: %w", entry, err)
		}
		p, err := strconv.ParseFloat(strings.TrimSuffix(ps, "%"), 64)
		if err != nil || p < 0 || p > 100 {
			return nil, nil, fmt.Errorf("entry %q: percent is not a number between 0 and 100", entry)
		}
		total += p
		if total > 100+1e-9 { // with slack for float sums such as 3 x 33.33 + 0.01
			return nil, nil, fmt.Errorf("percentages add up to more than 100 (%g)", total)
		}
		vals = append(vals, v)
		cum = append(cum, total)
	}
	return vals, cum, nil
}

// pick rolls [0,100) and returns the value whose cumulative percentage covers it, ok false
// when none does (the remainder of the table: the default).
func pick[T any](vals []T, cum []float64) (T, bool) {
	roll := 100 * rand.Float64()
	for i, c := range cum {
		if roll < c || c >= 100 {
			return vals[i], true
		}
	}
	var zero T
	return zero, false
}

// pickStatus is fortio's status= argument: 400 when it cannot be parsed, 200 for the
// remainder of a percentage table.
func pickStatus(arg string) int {
	vals, cum, err := weighted(arg, strconv.Atoi)
	if err != nil {
		return http.StatusBadRequest
	}
	if s, ok := pick(vals, cum); ok {
		return s
	}
	return http.StatusOK
}

// pickDelay is fortio's delay= argument, capped at maxEchoDelay; no delay (-1) when it is
// absent or cannot be parsed.
func pickDelay(arg string) time.Duration {
	if arg == "" {
		return -1
	}
	vals, cum, err := weighted(arg, time.ParseDuration)
	if err != nil {
		return -1
	}
	d, ok := pick(vals, cum)
	if !ok {
		return -1
	}
	return min(d, maxEchoDelay)
}

// pickSize is fortio's size= argument, clamped to [0, maxPayloadSize]; -1 (echo the
// request body) when it is absent, cannot be parsed or the table's remainder is rolled.
func pickSize(arg string) int {
	if arg == "" {
		return -1
	}
	vals, cum, err := weighted(arg, strconv.Atoi)
	if err != nil {
		return -1
	}
	s, ok := pick(vals, cum)
	if !ok {
		return -1
	}
	return max(0, min(s, maxPayloadSize))
}

// probability is fortio's close= argument: "true" always, a number is a percentage,
// "" and "false" never, anything else always (as fortio treats it).
func probability(arg string) bool {
	switch arg {
	case "", "false":
		return false
	case "true":
		return true
	}
	p, err := strconv.ParseFloat(arg, 64)
	if err != nil {
		return true
	}
	return 100*rand.Float64() < p
}

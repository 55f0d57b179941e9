package config

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/scenarios"
)

// bigVirtualService is the probe of issue 17: one VirtualService of n routes, in block
// style as kubectl writes it (about 80 bytes a route).
func bigVirtualService(name string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  hosts:\n  - backend\n  http:\n", name)
	for i := range n {
		fmt.Fprintf(&b, "  - match:\n    - uri:\n        exact: /r%06d\n    route:\n    - destination:\n        host: backend\n", i)
	}
	return b.String()
}

// nested returns a flow-style value nested depth levels deep.
func nested(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }

func helloScenario(tb testing.TB) string {
	tb.Helper()
	data, _, err := scenarios.Lookup("hello")
	if err != nil {
		tb.Fatal(err)
	}
	return string(data)
}

func errorList(t *testing.T, err error) ErrorList {
	t.Helper()
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %v (%T) is not an ErrorList", err, err)
	}
	return list
}

func TestLimitsRefuseBeforeDecoding(t *testing.T) {
	hello := helloScenario(t)
	big := bigVirtualService("big", 127672)
	if len(big) < 10<<20 {
		t.Fatalf("probe is %d bytes, want the issue's 10 MB", len(big))
	}
	many := func(n int, format string) string {
		var d []string
		for i := range n {
			d = append(d, fmt.Sprintf(format, i))
		}
		return strings.Join(d, "---\n")
	}
	hosts := make([]string, 1025)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d", i)
	}
	routes := strings.Repeat("{route: [{destination: {host: backend}}]}, ", MaxRoutes) + "{route: [{destination: {host: backend}}]}"
	tests := []struct {
		name  string
		input string
		want  []string // substrings of the first problem
		lines int      // problems reported, 0 = do not check
	}{
		{name: "10 MB VirtualService", input: docs(hello, big),
			want: []string{"f.yaml: VirtualService default/big: spec.http: 127672 items (11.9 MiB) in an object of 11.9 MiB, above the limit of 1.5 MiB for one object"}},
		{name: "routes above MaxRoutes", input: docs(hello, vs("  hosts: [backend]\n  http: ["+routes+"]\n")),
			want: []string{"VirtualService default/backend: spec.http: 4097 routes (http, tcp and tls together), above the limit of 4096"}},
		{name: "hosts above their limit", input: docs(hello, vs("  hosts: ["+strings.Join(hosts, ", ")+"]\n")),
			want: []string{"VirtualService default/backend: spec.hosts: 1025 items, above the limit of 1024"}},
		{name: "nesting", input: docs(hello, vs("  hosts: [backend]\n  x: "+nested(MaxDepth)+"\n")),
			want: []string{"VirtualService default/backend: spec.x", "levels deep, above the limit of 64"}},
		{name: "yaml parser depth", input: docs(hello, vs("  hosts: "+nested(20000)+"\n")),
			want: []string{"parse YAML", "max depth"}},
		{name: "alias bomb", input: docs(hello, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: lol}
spec:
  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
  i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`), want: []string{"f.yaml: document 7: parse YAML", "excessive aliasing"}},
		{name: "file above MaxFileBytes", input: hello + "\n#" + strings.Repeat("x", MaxFileBytes),
			want: []string{"f.yaml: document 1: the file is 16.0 MiB, above the limit of 16.0 MiB"}},
		{name: "too many problems", input: many(300, "apiVersion: v1\nkind: Service\nmetadata: {name: s%d}\nspec: {ports: [{port: 0}]}\n"),
			want: []string{"f.yaml"}, lines: MaxErrors + 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := Load("f.yaml", []byte(tc.input))
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("Load accepted it")
			}
			list := errorList(t, err)
			first := list[0].Error()
			for _, w := range tc.want {
				if !strings.Contains(first, w) {
					t.Errorf("first problem %q does not say %q", first, w)
				}
			}
			if tc.lines > 0 && len(list) != tc.lines {
				t.Errorf("%d problems reported, want %d; last: %s", len(list), tc.lines, list[len(list)-1])
			}
			// Refused before decoding: the YAML node tree is the one copy made of the input.
			// Loading an object within the limits costs about 160 bytes allocated per input
			// byte (its typed, JSON and proto forms); the refusals cost under 10. Bytes, not
			// seconds: the time depends on the machine's load, the bytes do not.
			alloc := after.TotalAlloc - before.TotalAlloc
			if limit := uint64(16*len(tc.input) + 32<<20); alloc > limit {
				t.Errorf("refusing allocated %d MiB for %d KiB of input, above %d MiB: it decoded what it should refuse", alloc>>20, len(tc.input)>>10, limit>>20)
			}
			t.Logf("%s (%v, %d MiB allocated)", first, took, alloc>>20)
		})
	}
	// The scenario itself is within every limit.
	if _, err := Load("f.yaml", []byte(hello)); err != nil {
		t.Fatalf("hello: %v", err)
	}
}

// TestApplyOfBigObjectIsRefusedCheaply: the 10 MB probe, applied to a running scenario,
// is refused naming the file, object and field, the scenario is unchanged, and refusing
// it does not build the object (a few MB allocated, not the GB it once took).
func TestApplyOfBigObjectIsRefusedCheaply(t *testing.T) {
	s, err := Load("hello.yaml", []byte(helloScenario(t)))
	if err != nil {
		t.Fatal(err)
	}
	before := len(s.Objects)
	big := []byte(bigVirtualService("big", 127672))
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	next, changes, err := s.Apply(File{Name: "big.yaml", Data: big})
	runtime.ReadMemStats(&m1)
	if err == nil || next != nil || changes != nil {
		t.Fatalf("Apply of the 10 MB VirtualService: err %v, changes %v", err, changes)
	}
	if got := err.Error(); !strings.HasPrefix(got, "big.yaml: VirtualService default/big: spec.http: ") || !strings.Contains(got, "above the limit of 1.5 MiB for one object") {
		t.Errorf("error %q: want it to name big.yaml, VirtualService default/big, spec.http and the limit", got)
	}
	if len(s.Objects) != before {
		t.Errorf("the scenario changed: %d objects, had %d", len(s.Objects), before)
	}
	// Splitting the file into documents copies it a few times (about 8 bytes allocated
	// per byte read, all garbage at once); decoding it took hundreds.
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 10*uint64(len(big)) {
		t.Errorf("refusing a %d-byte file allocated %d bytes", len(big), alloc)
	}
}

func TestCheckTotal(t *testing.T) {
	objs := []*Object{{JSON: make([]byte, MaxTotalBytes/2)}, {JSON: make([]byte, MaxTotalBytes/2)}}
	var errs ErrorList
	if !checkTotal("f.yaml", objs, &errs) || len(errs) != 0 {
		t.Fatalf("objects of exactly MaxTotalBytes refused: %v", errs)
	}
	objs = append(objs, &Object{JSON: []byte("{}")})
	if checkTotal("f.yaml", objs, &errs) || len(errs) != 1 || !strings.Contains(errs[0].Error(), "3 objects would weigh 32.0 MiB together, above the limit of 32.0 MiB") {
		t.Fatalf("objects above MaxTotalBytes: %v", errs)
	}
}

func TestScanHeader(t *testing.T) {
	for _, tc := range []struct {
		name, in                 string
		kind, ns, objName, field string
		fieldItems               int
	}{
		{name: "block", in: "apiVersion: v1\nkind: VirtualService\nmetadata:\n  name: big # the probe\n  namespace: \"prod\"\nspec:\n  hosts:\n  - a\n  http:\n  - x: 1\n  - x: 2\n  - x: 3\n  - x: 4\n  - x: 5\n  - x: 6\n",
			kind: "VirtualService", ns: "prod", objName: "big", field: "spec.http", fieldItems: 6},
		{name: "indented by four", in: "kind: 'ServiceEntry'\nmetadata:\n    name: se\nspec:\n    endpoints:\n    -   address: a\n    -   address: b\n    hosts: [a]\n",
			kind: "ServiceEntry", objName: "se", field: "spec.endpoints", fieldItems: 2},
		{name: "flow", in: `{"kind": "VirtualService", "metadata": {"name": "x"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := scanHeader([]byte(tc.in))
			if h.kind != tc.kind || h.namespace != tc.ns || h.name != tc.objName || h.largestField != tc.field || h.largestItems != tc.fieldItems {
				t.Errorf("scanHeader = %+v, want kind %q ns %q name %q field %q of %d items", h, tc.kind, tc.ns, tc.objName, tc.field, tc.fieldItems)
			}
		})
	}
}

// FuzzApplyLimits feeds Apply large, deep and aliased inputs: it never panics, and
// whatever it accepts is within every limit.
func FuzzApplyLimits(f *testing.F) {
	f.Add([]byte(bigVirtualService("f", 3)), uint16(1), uint8(0))
	f.Add([]byte(vs("  hosts: [backend]\n  x: ")), uint16(500), uint8(1))
	f.Add([]byte("a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"), uint16(100), uint8(2))
	f.Add([]byte(vs("  hosts: [backend]\n  http:\n")), uint16(5000), uint8(3))
	hello := helloScenario(f)
	base, err := Load("hello.yaml", []byte(hello))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, n uint16, shape uint8) {
		// shape grows data n times in one of four ways: repeated, nested, aliased, routes.
		var in []byte
		switch shape % 4 {
		case 0:
			in = []byte(strings.Repeat(string(data)+"\n---\n", int(n%64)+1))
		case 1:
			in = append(append(append([]byte{}, data...), nested(int(n))...), '\n')
		case 2:
			in = append([]byte{}, data...)
			for i := range int(n % 32) {
				in = fmt.Appendf(in, "k%d: &k%d [*k%d, *k%d, *k%d]\n", i+1, i+1, i, i, i)
			}
		case 3:
			in = append([]byte{}, data...)
			for i := range int(n) {
				in = fmt.Appendf(in, "  - route: [{destination: {host: backend}}]\n    name: r%d\n", i)
			}
		}
		next, _, err := base.Apply(File{Name: "f.yaml", Data: in})
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 || len(list) > MaxErrors+1 {
				t.Fatalf("Apply error %v: want an ErrorList of 1..%d problems", err, MaxErrors+1)
			}
			return
		}
		total := 0
		for _, o := range next.Objects {
			if len(o.JSON) > MaxObjectBytes {
				t.Fatalf("accepted %s of %d bytes", o.Origin, len(o.JSON))
			}
			total += len(o.JSON)
		}
		if total > MaxTotalBytes {
			t.Fatalf("accepted a config of %d bytes", total)
		}
	})
}

func TestReadLimited(t *testing.T) {
	ok := strings.Repeat("a", MaxFileBytes)
	if data, err := ReadLimited("ok.yaml", strings.NewReader(ok)); err != nil || len(data) != MaxFileBytes {
		t.Errorf("a file of exactly MaxFileBytes: %d bytes, %v", len(data), err)
	}
	if _, err := ReadLimited("big.yaml", strings.NewReader(ok+"a")); err == nil || err.Error() != "read big.yaml: the file is larger than the limit of 16.0 MiB for one file" {
		t.Errorf("a file above MaxFileBytes: %v", err)
	}
}

// TestRefsOfOversizeFile: `delete -f` of the 10 MB probe names it from its header lines
// without parsing it; a file above MaxFileBytes is refused.
func TestRefsOfOversizeFile(t *testing.T) {
	refs, err := Refs("big.yaml", "", []byte(bigVirtualService("big", 127672)))
	if err != nil || len(refs) != 1 || refs[0] != (Ref{Kind: "VirtualService", Namespace: "default", Name: "big"}) {
		t.Errorf("Refs of the 10 MB VirtualService = %v, %v", refs, err)
	}
	if _, err := Refs("huge.yaml", "", make([]byte, MaxFileBytes+1)); err == nil || !strings.Contains(err.Error(), "above the limit of 16.0 MiB for one file") {
		t.Errorf("Refs of a file above MaxFileBytes: %v", err)
	}
}

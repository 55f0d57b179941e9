package fraction

import (
	"testing"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

func TestFromScalesTheDenominator(t *testing.T) {
	for _, tc := range []struct {
		in   *typev3.FractionalPercent
		want Fraction
	}{
		{nil, Fraction{0, 100}},
		{&typev3.FractionalPercent{Numerator: 50}, Fraction{50, 100}},
		{&typev3.FractionalPercent{Numerator: 5, Denominator: typev3.FractionalPercent_TEN_THOUSAND}, Fraction{5, 10000}},
		{&typev3.FractionalPercent{Numerator: 100000, Denominator: typev3.FractionalPercent_MILLION}, Fraction{100000, 1000000}},
	} {
		if got := From(tc.in); got != tc.want {
			t.Errorf("From(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestSampleRates(t *testing.T) {
	if (Fraction{0, 100}).Sample() {
		t.Error("0% sampled")
	}
	for range 100 {
		if !(Fraction{100, 100}).Sample() {
			t.Fatal("100% not sampled")
		}
	}
	hits := 0
	const n = 20000
	for range n {
		if (Fraction{25, 100}).Sample() {
			hits++
		}
	}
	// 25% of 20000 = 5000, standard deviation about 61: allow 6 of them.
	if hits < 4630 || hits > 5370 {
		t.Errorf("25%% sampled %d of %d", hits, n)
	}
}

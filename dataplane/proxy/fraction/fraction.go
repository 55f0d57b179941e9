// Package fraction holds Envoy's FractionalPercent (type.v3.FractionalPercent), used by
// route runtime fractions, mirrors and the fault filter, sampled the way Envoy's runtime
// featureEnabled does.
package fraction

import (
	"math/rand/v2"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// Fraction is Numerator out of Denominator.
type Fraction struct {
	Numerator, Denominator uint32
}

// From converts a FractionalPercent (nil is 0%).
func From(p *typev3.FractionalPercent) Fraction {
	f := Fraction{Numerator: p.GetNumerator(), Denominator: 100}
	switch p.GetDenominator() {
	case typev3.FractionalPercent_TEN_THOUSAND:
		f.Denominator = 10000
	case typev3.FractionalPercent_MILLION:
		f.Denominator = 1000000
	}
	return f
}

// Sample reports whether one random draw falls in the fraction (random % denominator <
// numerator); a zero numerator never does.
func (f Fraction) Sample() bool {
	return f.Numerator > 0 && rand.Uint32N(f.Denominator) < f.Numerator
}

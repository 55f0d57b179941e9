// Package archrules holds no code: its test checks meshlab's import rules (DESIGN.md's
// boundaries) against `go list`, so that a broken rule fails the suite, not a review.
package archrules

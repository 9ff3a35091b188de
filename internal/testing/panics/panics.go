// Package panics checks in tests that a call panics: the misuse that a
// package answers with a panic (a programmer error) rather than an error.
package panics

import "testing"

// Expect calls f and fails tb, without stopping it, unless f panics; what
// names the call in the failure ("double Free did not panic").
func Expect(tb testing.TB, what string, f func()) {
	tb.Helper()
	defer func() {
		tb.Helper()
		if recover() == nil {
			tb.Errorf("%s did not panic", what)
		}
	}()
	f()
}

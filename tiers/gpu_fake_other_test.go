//go:build !(linux && (amd64 || arm64))

package tiers

import "testing"

// needFakeCUDA skips: the tier binds a CUDA driver, real or fake, only on
// linux/amd64 and linux/arm64.
func needFakeCUDA(t *testing.T) *fakeCUDA {
	t.Skip("the fake CUDA driver needs linux/amd64 or linux/arm64")
	return nil
}

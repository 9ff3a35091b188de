//go:build !amd64 || purego

package namespace

// haveSHANI is false off amd64 and with the purego tag: AppendPageKeys
// hashes one sha256.Sum256 a page.
const haveSHANI = false

func appendChainSHANI(dst []Key, prev Key, tokens []uint32, pageTokens, pages int) []Key {
	panic("namespace: appendChainSHANI without the SHA extensions")
}

func appendBlockKeysSHANI(dst []Key, prev Key, tokens []uint32, pageTokens, pages int) []Key {
	panic("namespace: appendBlockKeysSHANI without the SHA extensions")
}

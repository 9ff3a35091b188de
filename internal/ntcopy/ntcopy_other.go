//go:build !amd64 || purego

package ntcopy

// hasStream is false: this architecture (or a purego build) has no
// streaming copy, and Copy is copy.
const hasStream = false

const blockBytes = 128

func stream(dst, src *byte, n int) { panic("ntcopy: no streaming copy on this architecture") }

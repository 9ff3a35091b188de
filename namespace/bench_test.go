package namespace

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkPageKeys hashes long prompts into native keys, 16 tokens a page
// (the vLLM block size) and 64, in both key formats: a fresh result (one
// allocation) and AppendPageKeys into a reused slice (none). Compare it
// with BenchmarkSHA256: in the sha256-chain format a 16-token page is a
// 96-byte message, two SHA-256 blocks, and the chain is serial, so hashing
// n tokens takes at least twice as long as SHA-256 over their 4n bytes; the
// sha256-blocks format hashes just those 4n bytes.
func BenchmarkPageKeys(b *testing.B) {
	id := llama3_8B().ID()
	for _, n := range []int{128 << 10, 1 << 20} {
		toks := vectorTokens(n, 1)
		for _, pt := range []int{16, 64} {
			b.Run(fmt.Sprintf("tokens=%d/page=%d/PageKeys", n, pt), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(4 * n))
				loopCPU(b, func() { _ = PageKeys(id, toks, pt) })
			})
			b.Run(fmt.Sprintf("tokens=%d/page=%d/AppendPageKeys", n, pt), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(4 * n))
				dst := make([]Key, 0, n/pt)
				loopCPU(b, func() { dst = AppendPageKeys(dst[:0], Key(id), toks, pt) })
			})
			b.Run(fmt.Sprintf("tokens=%d/page=%d/blocks/PageKeys", n, pt), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(4 * n))
				loopCPU(b, func() { _ = KeyBlocks.AppendPageKeys(nil, Key(id), toks, pt) })
			})
			b.Run(fmt.Sprintf("tokens=%d/page=%d/blocks/AppendPageKeys", n, pt), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(4 * n))
				dst := make([]Key, 0, n/pt)
				loopCPU(b, func() { dst = KeyBlocks.AppendPageKeys(dst[:0], Key(id), toks, pt) })
			})
		}
	}
}

// BenchmarkSHA256 is the machine's SHA-256 speed, the reference for
// BenchmarkPageKeys: crypto/sha256 (SHA-NI where the CPU has it) over 4 MiB,
// the token bytes of a 1M-token prompt.
func BenchmarkSHA256(b *testing.B) {
	buf := make([]byte, 4<<20)
	b.Run("4MiB", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		loopCPU(b, func() { _ = sha256.Sum256(buf) })
	})
}

// loopCPU runs op in a b.Loop and reports, besides ns/op, cpu-ns/op: the
// CPU time the benchmark's thread spent per op where the OS tells it
// (threadCPU). On a machine shared with other work, ns/op also counts the
// time the thread waited for a core; cpu-ns/op does not.
func loopCPU(b *testing.B, op func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, ok := threadCPU()
	n := 0
	for b.Loop() {
		op()
		n++
	}
	if end, _ := threadCPU(); ok && n > 0 {
		b.ReportMetric(float64(end-start)/float64(n), "cpu-ns/op")
	}
}

// BenchmarkEngineHashes hashes a 128k-token prompt the way SGLang (64-token
// pages) and vLLM (16-token blocks) do.
func BenchmarkEngineHashes(b *testing.B) {
	toks := vectorTokens(128<<10, 2)
	b.Run("sglang/page=64", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(4 * len(toks)))
		for b.Loop() {
			_ = SGLangPageHashes(toks, 64)
		}
	})
	none := VLLMNoneHash("0")
	b.Run("vllm/block=16", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(4 * len(toks)))
		for b.Loop() {
			_ = VLLMBlockHashes(none, toks, 16)
		}
	})
}

func BenchmarkDescriptor(b *testing.B) {
	d := llama3_70B()
	d.Extra = map[string]string{"rope_scaling": "yarn", "max_model_len": "131072"}
	b.Run("ID", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = d.ID()
		}
	})
	b.Run("PageSize", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = d.PageSize()
		}
	})
	c := d.Canonical()
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

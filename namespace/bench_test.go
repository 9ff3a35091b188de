package namespace

import (
	"fmt"
	"testing"
)

// BenchmarkPageKeys hashes long prompts into native keys, 16 tokens a page:
// PageKeys (one allocation, the result) and AppendPageKeys into a reused
// slice (none).
func BenchmarkPageKeys(b *testing.B) {
	id := llama3_8B().ID()
	for _, n := range []int{128 << 10, 1 << 20} {
		toks := vectorTokens(n, 1)
		b.Run(fmt.Sprintf("tokens=%d/PageKeys", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				_ = PageKeys(id, toks, 16)
			}
		})
		b.Run(fmt.Sprintf("tokens=%d/AppendPageKeys", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(4 * n))
			dst := make([]Key, 0, n/16)
			for b.Loop() {
				dst = AppendPageKeys(dst[:0], Key(id), toks, 16)
			}
		})
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

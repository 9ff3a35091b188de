package namespace

import "strings"

// knownDTypes lists, for error messages, the dtypes whose width strata knows.
const knownDTypes = "fp64, fp32, fp16, bf16, fp8, fp8_e4m3, fp8_e5m2, fp8_e4m3fnuz, fp8_e5m2fnuz, fp8_e8m0, int64, int32, int8, uint8"

// DTypeBytes reports the element width of a dtype after normalization (so
// "bf16", "bfloat16" and "torch.bfloat16" are all 2). ok is false for a
// dtype whose width strata does not know: 4-bit formats with per-block
// scales, engine-specific packed layouts and so on. Those are still accepted
// when the descriptor declares PageBytes explicitly.
func DTypeBytes(dtype string) (n uint64, ok bool) {
	switch normDType(dtype) {
	case "fp64", "int64":
		return 8, true
	case "fp32", "int32":
		return 4, true
	case "fp16", "bf16":
		return 2, true
	case "fp8", // the engine's default fp8 flavour (vLLM's kv_cache_dtype "fp8")
		"fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz",
		"fp8_e8m0", // MX block scales (PyTorch's float8_e8m0fnu)
		"int8", "uint8":
		return 1, true
	}
	return 0, false
}

// normDType trims, lower-cases, strips a "torch." prefix and resolves the
// unambiguous aliases PyTorch and the engines use. It is idempotent. "fp8"
// stays "fp8": its flavour depends on the engine and the platform.
func normDType(s string) string {
	s = strings.TrimPrefix(lower(trim(s)), "torch.")
	switch s {
	case "float32", "float":
		return "fp32"
	case "float16", "half":
		return "fp16"
	case "bfloat16":
		return "bf16"
	case "fp8_e4m3fn", "float8_e4m3fn":
		return "fp8_e4m3"
	case "float8_e5m2":
		return "fp8_e5m2"
	case "float8_e4m3fnuz":
		return "fp8_e4m3fnuz"
	case "float8_e5m2fnuz":
		return "fp8_e5m2fnuz"
	}
	return s
}

// lower maps ASCII A-Z to a-z and keeps every other byte, so that any
// language reproduces it exactly (Unicode case mapping differs between
// libraries). It does not allocate when s has no upper-case ASCII letter.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// asciiSpace is the set trim removes: the ASCII whitespace characters, so
// that Python's s.strip(" \t\n\v\f\r") reproduces it.
const asciiSpace = " \t\n\v\f\r"

// trim removes leading and trailing ASCII whitespace.
func trim(s string) string { return strings.Trim(s, asciiSpace) }

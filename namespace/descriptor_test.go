package namespace

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// llama3_8B is Meta-Llama-3-8B: 32 layers, 8 KV heads of 128 (GQA), bf16.
func llama3_8B() Descriptor {
	return Descriptor{
		Tenant:            "acme",
		Model:             "meta-llama/Meta-Llama-3-8B-Instruct",
		ModelRevision:     "rev-1",
		TokenizerRevision: "rev-1",
		Engine:            "vllm",
		KVFormatVersion:   1,
		DType:             "bf16",
		Layout:            "nhd",
		PageTokens:        16,
		NumLayers:         32,
		NumKVHeads:        8,
		HeadDim:           128,
		Compute:           ComputeProfile{Params: 8_030_261_248, AttentionHeads: 32, AttentionHeadDim: 128},
	}
}

// llama3_70B is Meta-Llama-3-70B: 80 layers, 8 KV heads of 128, bf16.
func llama3_70B() Descriptor {
	d := llama3_8B()
	d.Model = "meta-llama/Meta-Llama-3-70B-Instruct"
	d.NumLayers = 80
	d.Compute = ComputeProfile{Params: 70_553_706_496, AttentionHeads: 64, AttentionHeadDim: 128}
	return d
}

// deepseekV3 is DeepSeek-V3 under MLA: 61 layers, a 576-wide latent
// (kv_lora_rank 512 + rope dim 64) per token and layer, bf16, 64-token pages.
func deepseekV3() Descriptor {
	return Descriptor{
		Tenant:       "acme",
		Model:        "deepseek-ai/DeepSeek-V3",
		Engine:       "sglang",
		DType:        "bf16",
		Layout:       "page_first",
		PageTokens:   64,
		NumLayers:    61,
		MLALatentDim: 576,
		Compute:      ComputeProfile{Params: 671_000_000_000, AttentionHeads: 128, AttentionHeadDim: 192},
	}
}

func with(d Descriptor, f func(*Descriptor)) Descriptor {
	f(&d)
	return d
}

func TestValidate(t *testing.T) {
	long := strings.Repeat("x", MaxStringLen+1)
	manyExtra := map[string]string{}
	for i := range MaxExtraEntries + 1 {
		manyExtra[string(rune('a'+i%26))+strings.Repeat("k", i)] = "v"
	}
	tests := []struct {
		name  string
		d     Descriptor
		field string // "" = valid
	}{
		{"llama3 8B", llama3_8B(), ""},
		{"llama3 70B TP8 PP2", with(llama3_70B(), func(d *Descriptor) { d.TPSize, d.TPRank, d.PPSize, d.PPRank = 8, 7, 2, 1 }), ""},
		{"GQA heads replicated over TP", with(llama3_70B(), func(d *Descriptor) { d.TPSize, d.TPRank = 16, 15 }), ""},
		{"deepseek V3 MLA", deepseekV3(), ""},
		{"opaque layout with unknown dtype", with(llama3_8B(), func(d *Descriptor) { d.KVDType, d.PageBytes = "nvfp4", 600_000 }), ""},
		{"opaque layout without geometry", Descriptor{Tenant: "t", Model: "m", PageTokens: 16, PageBytes: 4096}, ""},
		{"whitespace is trimmed before checks", with(llama3_8B(), func(d *Descriptor) { d.Tenant = "  acme\t" }), ""},

		{"tenant required", with(llama3_8B(), func(d *Descriptor) { d.Tenant = "" }), "tenant"},
		{"blank tenant", with(llama3_8B(), func(d *Descriptor) { d.Tenant = " \n" }), "tenant"},
		{"model required", with(llama3_8B(), func(d *Descriptor) { d.Model = "" }), "model"},
		{"page_tokens 0", with(llama3_8B(), func(d *Descriptor) { d.PageTokens = 0 }), "page_tokens"},
		{"page_tokens too large", with(llama3_8B(), func(d *Descriptor) { d.PageTokens = MaxPageTokens + 1 }), "page_tokens"},
		{"tp_rank >= tp_size", with(llama3_8B(), func(d *Descriptor) { d.TPSize, d.TPRank = 2, 2 }), "tp_rank"},
		{"tp_rank with default tp_size", with(llama3_8B(), func(d *Descriptor) { d.TPRank = 1 }), "tp_rank"},
		{"pp_rank >= pp_size", with(llama3_8B(), func(d *Descriptor) { d.PPSize, d.PPRank = 2, 5 }), "pp_rank"},
		{"cp_rank >= cp_size", with(llama3_8B(), func(d *Descriptor) { d.CPSize, d.CPRank = 2, 2 }), "cp_rank"},
		{"MLA omits TP", with(deepseekV3(), func(d *Descriptor) { d.TPSize, d.TPRank = 8, 3 }), "tp_size"},
		{"MLA with kv heads", with(deepseekV3(), func(d *Descriptor) { d.NumKVHeads, d.HeadDim = 128, 128 }), "mla_latent_dim"},
		{"unknown checksum", with(llama3_8B(), func(d *Descriptor) { d.Checksum = 7 }), "checksum"},
		{"page_bytes over 1 GiB", with(llama3_8B(), func(d *Descriptor) { d.PageBytes = MaxPageBytes + 1 }), "page_bytes"},
		{"unknown dtype without page_bytes", with(llama3_8B(), func(d *Descriptor) { d.DType = "int3" }), "dtype"},
		{"unknown kv_dtype without page_bytes", with(llama3_8B(), func(d *Descriptor) { d.KVDType = "nvfp4" }), "kv_dtype"},
		{"missing dtype without page_bytes", with(llama3_8B(), func(d *Descriptor) { d.DType = "" }), "dtype"},
		{"no layers", with(llama3_8B(), func(d *Descriptor) { d.NumLayers = 0 }), "num_layers"},
		{"no kv heads", with(llama3_8B(), func(d *Descriptor) { d.NumKVHeads = 0 }), "num_kv_heads"},
		{"no head_dim", with(llama3_8B(), func(d *Descriptor) { d.HeadDim = 0 }), "num_kv_heads"},
		{"heads do not split over tp", with(llama3_8B(), func(d *Descriptor) { d.TPSize = 3 }), "num_kv_heads"},
		{"heads do not replicate over tp", with(llama3_8B(), func(d *Descriptor) { d.TPSize = 12 }), "num_kv_heads"},
		{"uneven pipeline stages", with(deepseekV3(), func(d *Descriptor) { d.PPSize = 4 }), "num_layers"},
		{"page does not split over cp", with(llama3_8B(), func(d *Descriptor) { d.PageTokens, d.CPSize = 15, 2 }), "page_tokens"},
		{"geometry over 1 GiB", with(llama3_70B(), func(d *Descriptor) { d.PageTokens, d.DType = 4096, "fp32" }), "page_bytes"},
		{"geometry overflows uint64", with(llama3_8B(), func(d *Descriptor) { d.NumLayers, d.NumKVHeads, d.HeadDim = 1<<31, 1<<31, 1<<31 }), "page_bytes"},
		{"string too long", with(llama3_8B(), func(d *Descriptor) { d.ModelRevision = long }), "model_revision"},
		{"invalid UTF-8", with(llama3_8B(), func(d *Descriptor) { d.Adapter = "lora\xff" }), "adapter"},
		{"too many extra entries", with(llama3_8B(), func(d *Descriptor) { d.Extra = manyExtra }), "extra"},
		{"empty extra key", with(llama3_8B(), func(d *Descriptor) { d.Extra = map[string]string{"": "v"} }), "extra"},
		{"extra key too long", with(llama3_8B(), func(d *Descriptor) { d.Extra = map[string]string{strings.Repeat("k", MaxExtraKeyLen+1): "v"} }), "extra"},
		{"extra value too long", with(llama3_8B(), func(d *Descriptor) { d.Extra = map[string]string{"k": long} }), "extra"},
		{"extra value invalid UTF-8", with(llama3_8B(), func(d *Descriptor) { d.Extra = map[string]string{"k": "\xc3"} }), "extra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.d.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if tt.d.PageSize() == 0 {
					t.Fatalf("valid descriptor has PageSize 0")
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v, want an ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.field+": ") {
				t.Fatalf("Validate = %q, want it to name field %q", err, tt.field)
			}
		})
	}
}

func TestValidateReportsEveryRule(t *testing.T) {
	d := Descriptor{PageTokens: 0, TPSize: 2, TPRank: 3}
	err := d.Validate()
	for _, f := range []string{"tenant", "model", "page_tokens", "tp_rank", "dtype"} {
		if !strings.Contains(err.Error(), f+": ") {
			t.Errorf("Validate = %q, missing %q", err, f)
		}
	}
}

func TestNormalize(t *testing.T) {
	in := Descriptor{
		Tenant:       " acme ",
		Model:        "\tMeta-Llama\n",
		Engine:       " vLLM ",
		DType:        "torch.BFloat16",
		KVDType:      "auto",
		Layout:       "NHD",
		Quantization: "AWQ",
		Extra:        map[string]string{},
	}
	got := in.Normalize()
	want := Descriptor{
		Tenant: "acme", Model: "Meta-Llama", Engine: "vllm", DType: "bf16", KVDType: "bf16",
		Layout: "nhd", Quantization: "awq", TPSize: 1, PPSize: 1, CPSize: 1, Checksum: CRC32C, KeyFormat: KeyChain,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Normalize =\n%+v\nwant\n%+v", got, want)
	}
	if again := got.Normalize(); !reflect.DeepEqual(again, got) {
		t.Fatalf("Normalize is not idempotent: %+v", again)
	}

	// The result shares no memory with the input.
	in = llama3_8B()
	in.Extra = map[string]string{"k": "v"}
	got = in.Normalize()
	got.Extra["k"] = "changed"
	if in.Extra["k"] != "v" {
		t.Fatal("Normalize result aliases the input's Extra")
	}

	// Lower-casing is ASCII-only, so every language reproduces it.
	if got := (Descriptor{Engine: "ÉNGINE"}).Normalize().Engine; got != "Éngine" {
		t.Fatalf("Engine = %q, want ASCII-only lower-casing", got)
	}
}

func TestDTypeAliases(t *testing.T) {
	for in, want := range map[string]string{
		"bf16": "bf16", "BF16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16",
		"float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
		"float8_e4m3fn": "fp8_e4m3", "fp8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2",
		"fp8": "fp8", " int8 ": "int8", "nvfp4": "nvfp4", "": "",
	} {
		if got := normDType(in); got != want {
			t.Errorf("normDType(%q) = %q, want %q", in, got, want)
		}
		if got := normDType(normDType(in)); got != want {
			t.Errorf("normDType is not idempotent on %q", in)
		}
	}
	for dt, want := range map[string]uint64{"fp32": 4, "bfloat16": 2, "fp16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1} {
		if got, ok := DTypeBytes(dt); !ok || got != want {
			t.Errorf("DTypeBytes(%q) = %d, %v; want %d", dt, got, ok, want)
		}
	}
	if _, ok := DTypeBytes("int4"); ok {
		t.Error("int4 has a width; 4-bit formats carry scales and need page_bytes")
	}
}

func TestIDStability(t *testing.T) {
	base := llama3_8B()
	same := []struct {
		name string
		d    Descriptor
	}{
		{"tp 0 vs 1", with(base, func(d *Descriptor) { d.TPSize, d.PPSize, d.CPSize = 1, 1, 1 })},
		{"dtype spelling", with(base, func(d *Descriptor) { d.DType = "torch.BFLOAT16" })},
		{"kv_dtype auto", with(base, func(d *Descriptor) { d.KVDType = "auto" })},
		{"kv_dtype explicit", with(base, func(d *Descriptor) { d.KVDType = "bf16" })},
		{"checksum default", with(base, func(d *Descriptor) { d.Checksum = CRC32C })},
		{"empty extra", with(base, func(d *Descriptor) { d.Extra = map[string]string{} })},
		{"engine case", with(base, func(d *Descriptor) { d.Engine = "VLLM" })},
		{"whitespace", with(base, func(d *Descriptor) { d.Model = " " + d.Model + "\n" })},
	}
	for _, s := range same {
		if s.d.ID() != base.ID() {
			t.Errorf("%s: ID differs", s.name)
		}
	}
	differ := []struct {
		name string
		d    Descriptor
	}{
		{"tp_size", with(base, func(d *Descriptor) { d.TPSize = 2 })},
		{"tp_rank", with(base, func(d *Descriptor) { d.TPSize, d.TPRank = 2, 1 })},
		{"dtype", with(base, func(d *Descriptor) { d.DType = "fp16" })},
		{"kv_dtype", with(base, func(d *Descriptor) { d.KVDType = "fp8_e4m3" })},
		{"model revision", with(base, func(d *Descriptor) { d.ModelRevision = "rev-2" })},
		{"tenant", with(base, func(d *Descriptor) { d.Tenant = "globex" })},
		{"tenant case", with(base, func(d *Descriptor) { d.Tenant = "ACME" })},
		{"page_tokens", with(base, func(d *Descriptor) { d.PageTokens = 32 })},
		{"adapter", with(base, func(d *Descriptor) { d.Adapter = "sql-lora" })},
		{"checksum", with(base, func(d *Descriptor) { d.Checksum = SHA256 })},
		{"extra", with(base, func(d *Descriptor) { d.Extra = map[string]string{"rope_scaling": "yarn"} })},
		{"compute", with(base, func(d *Descriptor) { d.Compute.Params++ })},
	}
	seen := map[ID]string{base.ID(): "base"}
	for _, s := range differ {
		id := s.d.ID()
		if prev, ok := seen[id]; ok {
			t.Errorf("%s: same ID as %s", s.name, prev)
		}
		seen[id] = s.name
	}
}

func TestPageSize(t *testing.T) {
	const MiB = 1 << 20
	tests := []struct {
		name string
		d    Descriptor
		want uint64
	}{
		// 2 × 32 layers × 8 heads × 128 × 2 bytes × 16 tokens = 2 MiB.
		{"llama3 8B bf16 TP1", llama3_8B(), 2 * 32 * 8 * 128 * 2 * 16},
		{"llama3 8B is 2 MiB", llama3_8B(), 2 * MiB},
		{"llama3 8B TP2 halves", with(llama3_8B(), func(d *Descriptor) { d.TPSize = 2 }), 1 * MiB},
		{"llama3 8B TP8: one head a rank", with(llama3_8B(), func(d *Descriptor) { d.TPSize = 8 }), MiB / 4},
		{"llama3 8B TP16: heads replicated", with(llama3_8B(), func(d *Descriptor) { d.TPSize = 16 }), MiB / 4},
		{"llama3 8B fp8 KV", with(llama3_8B(), func(d *Descriptor) { d.KVDType = "fp8_e4m3" }), 1 * MiB},
		{"llama3 8B fp32", with(llama3_8B(), func(d *Descriptor) { d.DType = "fp32" }), 4 * MiB},
		{"llama3 70B TP8 PP4", with(llama3_70B(), func(d *Descriptor) { d.TPSize, d.PPSize = 8, 4 }), 2 * 20 * 1 * 128 * 2 * 16},
		{"llama3 8B CP2 splits the page's tokens", with(llama3_8B(), func(d *Descriptor) { d.PageTokens, d.CPSize = 32, 2 }), 2 * MiB},
		// 61 layers × 576 × 2 bytes × 64 tokens, no factor 2.
		{"deepseek V3 MLA", deepseekV3(), 61 * 576 * 2 * 64},
		{"deepseek V3 MLA fp8", with(deepseekV3(), func(d *Descriptor) { d.KVDType = "fp8_e4m3" }), 61 * 576 * 64},
		{"explicit page_bytes wins", with(llama3_8B(), func(d *Descriptor) { d.PageBytes = 12345 }), 12345},
		{"invalid geometry", with(llama3_8B(), func(d *Descriptor) { d.NumLayers = 0 }), 0},
		{"over 1 GiB", with(llama3_70B(), func(d *Descriptor) { d.PageTokens, d.DType = 4096, "fp32" }), 0},
	}
	for _, tt := range tests {
		if got := tt.d.PageSize(); got != tt.want {
			t.Errorf("%s: PageSize = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestForkKey(t *testing.T) {
	base := llama3_8B()
	fk := base.ForkKey()
	if len(fk) != 64 || strings.Trim(fk, "0123456789abcdef") != "" {
		t.Fatalf("ForkKey = %q, want 64 lower-case hex digits", fk)
	}
	for name, d := range map[string]Descriptor{
		"tp":          with(base, func(d *Descriptor) { d.TPSize, d.TPRank = 2, 1 }),
		"page_tokens": with(base, func(d *Descriptor) { d.PageTokens = 64 }),
		"dtype":       with(base, func(d *Descriptor) { d.KVDType = "fp8" }),
		"engine":      with(base, func(d *Descriptor) { d.Engine, d.KVFormatVersion = "sglang", 3 }),
		"checksum":    with(base, func(d *Descriptor) { d.Checksum = SHA256 }),
		"whitespace":  with(base, func(d *Descriptor) { d.Tenant = " acme " }),
	} {
		if d.ForkKey() != fk {
			t.Errorf("%s: a layout factor changed the fork key", name)
		}
	}
	for name, d := range map[string]Descriptor{
		"tenant":             with(base, func(d *Descriptor) { d.Tenant = "globex" }),
		"model":              with(base, func(d *Descriptor) { d.Model = "other" }),
		"model_revision":     with(base, func(d *Descriptor) { d.ModelRevision = "rev-2" }),
		"adapter":            with(base, func(d *Descriptor) { d.Adapter = "lora" }),
		"adapter_revision":   with(base, func(d *Descriptor) { d.AdapterRevision = "2" }),
		"tokenizer_revision": with(base, func(d *Descriptor) { d.TokenizerRevision = "rev-2" }),
	} {
		if d.ForkKey() == fk {
			t.Errorf("%s: an identity field did not change the fork key", name)
		}
	}
}

func TestLayoutDiff(t *testing.T) {
	base := llama3_8B()
	tests := []struct {
		name string
		b    Descriptor
		want []string
	}{
		{"same", base, nil},
		{"defaults", with(base, func(d *Descriptor) { d.TPSize, d.KVDType, d.Checksum = 1, "bf16", CRC32C }), nil},
		{"tp size", with(base, func(d *Descriptor) { d.TPSize = 2 }), []string{"tp_size"}},
		{"tp rank", with(base, func(d *Descriptor) { d.TPSize, d.TPRank = 2, 1 }), []string{"tp_rank", "tp_size"}},
		{"dtype follows into kv_dtype", with(base, func(d *Descriptor) { d.DType = "fp16" }), []string{"dtype", "kv_dtype"}},
		{"scale-out", with(base, func(d *Descriptor) { d.PageTokens, d.Engine, d.Extra = 64, "sglang", map[string]string{"a": "b"} }),
			[]string{"engine", "extra", "page_tokens"}},
		{"compute", with(base, func(d *Descriptor) { d.Compute.AttentionHeads = 1 }), []string{"compute"}},
	}
	for _, tt := range tests {
		if got := LayoutDiff(base, tt.b); !slices.Equal(got, tt.want) {
			t.Errorf("%s: LayoutDiff = %q, want %q", tt.name, got, tt.want)
		}
		if got := LayoutDiff(tt.b, base); !slices.Equal(got, tt.want) {
			t.Errorf("%s: LayoutDiff is not symmetric: %q", tt.name, got)
		}
	}
}

// TestEveryFieldIsEncoded sets each Descriptor field in turn and checks
// that exactly one canonical field changes: no field is left out of the
// encoding (which would merge namespaces) and none is encoded twice.
func TestEveryFieldIsEncoded(t *testing.T) {
	base := Descriptor{}.Normalize()
	typ := reflect.TypeOf(base)
	if got, want := typ.NumField(), len(canonicalFields)-1; got != want {
		t.Fatalf("Descriptor has %d fields, canonical encoding %d (+ v)", got, want)
	}
	seen := map[string]string{}
	for i := range typ.NumField() {
		d := base
		f := reflect.ValueOf(&d).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Uint8, reflect.Uint32, reflect.Uint64:
			f.SetUint(f.Uint() + 1)
		case reflect.Map:
			f.Set(reflect.ValueOf(map[string]string{"k": "v"}))
		case reflect.Struct:
			f.Field(0).SetUint(1)
		default:
			t.Fatalf("field %s has unhandled kind %s", typ.Field(i).Name, f.Kind())
		}
		diff := LayoutDiff(base, d)
		if typ.Field(i).Name == "DType" { // an empty kv_dtype follows dtype
			diff = slices.DeleteFunc(diff, func(s string) bool { return s == "kv_dtype" })
		}
		if len(diff) != 1 {
			t.Fatalf("setting %s changes canonical fields %q, want exactly one", typ.Field(i).Name, diff)
		}
		if prev, ok := seen[diff[0]]; ok {
			t.Fatalf("%s and %s both encode as %q", prev, typ.Field(i).Name, diff[0])
		}
		seen[diff[0]] = typ.Field(i).Name
	}
}

package namespace

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestCanonicalFieldsSorted(t *testing.T) {
	var names []string
	for _, f := range canonicalFields {
		names = append(names, f.name)
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Fatalf("canonical fields are not strictly sorted at %q, %q", names[i-1], names[i])
		}
	}
}

func TestCanonicalGolden(t *testing.T) {
	d := Descriptor{
		Tenant: "acme", Model: "m", PageTokens: 16, DType: "BF16", TPSize: 0,
		Extra:   map[string]string{"z": "1", "a": "2"},
		Compute: ComputeProfile{Params: 7, AttentionHeads: 2, AttentionHeadDim: 3},
	}
	want := `{"adapter":"","adapter_revision":"","checksum":"crc32c",` +
		`"compute":{"attention_head_dim":3,"attention_heads":2,"params":7},` +
		`"cp_rank":0,"cp_size":1,"dtype":"bf16","engine":"","extra":{"a":"2","z":"1"},` +
		`"head_dim":0,"kv_dtype":"bf16","kv_format_version":0,"layout":"",` +
		`"mla_latent_dim":0,"model":"m","model_revision":"","num_kv_heads":0,` +
		`"num_layers":0,"page_bytes":0,"page_tokens":16,"pp_rank":0,"pp_size":1,` +
		`"quantization":"","tenant":"acme","tokenizer_revision":"","tp_rank":0,` +
		`"tp_size":1,"v":1}`
	if got := string(d.Canonical()); got != want {
		t.Fatalf("Canonical =\n%s\nwant\n%s", got, want)
	}
}

// TestJSONEscaping pins the string escaping to what Python's
// json.dumps(s, ensure_ascii=False) produces (testdata/check_vectors.py
// checks the same strings against a real Python).
func TestJSONEscaping(t *testing.T) {
	for in, want := range map[string]string{
		``:                `""`,
		`plain`:           `"plain"`,
		`"`:               `"\""`,
		`\`:               `"\\"`,
		"\b\f\n\r\t":      `"\b\f\n\r\t"`,
		"\x00\x01\x1f":    `"\u0000\u0001\u001f"`,
		"\x1b[0m":         `"\u001b[0m"`,
		"\x7f":            "\"\x7f\"",
		"<a href=x>&amp;": `"<a href=x>&amp;"`,
		"/":               `"/"`,
		"é日本😀":            `"é日本😀"`,
		"\u2028\u2029":    "\"\u2028\u2029\"",
		"a\"b\\c\nd\x02e": `"a\"b\\c\nd\u0002e"`,
	} {
		if got := string(appendJSONString(nil, in)); got != want {
			t.Errorf("appendJSONString(%q) = %s, want %s", in, got, want)
		}
	}
}

func testDescriptors() map[string]Descriptor {
	return map[string]Descriptor{
		"llama3 8B": llama3_8B(),
		"llama3 70B TP8 PP2 fp8 sha256": with(llama3_70B(), func(d *Descriptor) {
			d.TPSize, d.TPRank, d.PPSize, d.PPRank, d.KVDType, d.Checksum = 8, 3, 2, 1, "fp8_e4m3", SHA256
		}),
		"deepseek V3 MLA": deepseekV3(),
		"llama3 8B page format": with(llama3_8B(), func(d *Descriptor) {
			d.PageFormat = " kv:S2.L32.T16.H8.D128:bf16\t"
		}),
		"opaque": {Tenant: "t", Model: "m", PageTokens: 256, DType: "nvfp4", PageBytes: 1 << 20},
		"escapes": with(llama3_8B(), func(d *Descriptor) {
			d.Model = `we"ird\model`
			d.Adapter = "lora <v2> & co\u2028"
			d.Extra = map[string]string{"ctl": "a\x01b\tc\nd\x7f", "ünï": "日本語 😀", "Z": "upper sorts first"}
		}),
		"zero": {},
	}
}

func TestCanonicalRoundTrip(t *testing.T) {
	for name, d := range testDescriptors() {
		c := d.Canonical()
		got, err := Decode(c)
		if err != nil {
			t.Fatalf("%s: Decode(Canonical()): %v\n%s", name, err, c)
		}
		if want := d.Normalize(); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: Decode(Canonical()) =\n%+v\nwant\n%+v", name, got, want)
		}
		if !bytes.Equal(got.Canonical(), c) {
			t.Fatalf("%s: re-encoding differs", name)
		}
		if got.ID() != d.ID() {
			t.Fatalf("%s: ID changed across a round trip", name)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	good := string(llama3_8B().Canonical())
	replace := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("test input lacks %q", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	tests := map[string]string{
		"empty":               "",
		"not an object":       "[]",
		"null":                "null",
		"whitespace":          replace(`"tenant":"acme"`, `"tenant": "acme"`),
		"trailing newline":    good + "\n",
		"trailing garbage":    good + "{}",
		"leading space":       " " + good,
		"key order":           replace(`"adapter":"","adapter_revision":""`, `"adapter_revision":"","adapter":""`),
		"missing field":       replace(`"adapter":"",`, ``),
		"unknown field":       replace(`"adapter":"",`, `"adapter":"","bogus":1,`),
		"unknown compute key": replace(`"params":`, `"flops":1,"params":`),
		"key case":            replace(`"tenant"`, `"Tenant"`),
		"duplicate key":       replace(`"tenant":"acme"`, `"tenant":"evil","tenant":"acme"`),
		"string for number":   replace(`"tp_size":1`, `"tp_size":"1"`),
		"number for string":   replace(`"layout":"nhd"`, `"layout":1`),
		"float":               replace(`"tp_size":1`, `"tp_size":1.0`),
		"exponent":            replace(`"page_tokens":16`, `"page_tokens":1.6e1`),
		"leading zero":        replace(`"page_tokens":16`, `"page_tokens":016`),
		"negative":            replace(`"tp_rank":0`, `"tp_rank":-1`),
		"uint32 overflow":     replace(`"tp_rank":0`, `"tp_rank":4294967296`),
		"not normalized":      replace(`"tp_size":1`, `"tp_size":0`),
		"upper-case dtype":    replace(`"dtype":"bf16"`, `"dtype":"BF16"`),
		"kv_dtype left empty": replace(`"kv_dtype":"bf16"`, `"kv_dtype":""`),
		"unknown checksum":    replace(`"crc32c"`, `"md5"`),
		"checksum as number":  replace(`"checksum":"crc32c"`, `"checksum":1`),
		"version 2":           replace(`"v":1`, `"v":2`),
		"version missing":     replace(`,"v":1`, ``),
		"null extra":          replace(`"extra":{}`, `"extra":null`),
		"null compute":        replace(`"compute":{"attention_head_dim":128,`, `"compute":null,"x":{"attention_head_dim":128,`),
		"escaped non-ASCII":   replace(`"acme"`, `"\u0061cme"`),
		"escaped slash":       replace(`"meta-llama/Meta`, `"meta-llama\/Meta`),
		"invalid UTF-8":       replace(`"acme"`, "\"acm\xff\""),
	}
	for name, in := range tests {
		d, err := Decode([]byte(in))
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Decode = %+v, %v; want an ErrInvalid", name, d, err)
		}
	}
	if _, err := Decode(bytes.Repeat([]byte{' '}, MaxCanonicalLen+1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("oversized input: %v", err)
	}
	// Sanity: the base input itself decodes.
	if _, err := Decode([]byte(good)); err != nil {
		t.Fatalf("Decode(good): %v", err)
	}
}

func TestDecodeNamesMissingFields(t *testing.T) {
	_, err := Decode([]byte(`{"tenant":"acme","v":1,"checksum":"crc32c"}`))
	if err == nil || !strings.Contains(err.Error(), `"model"`) {
		t.Fatalf("Decode = %v, want it to name the missing fields", err)
	}
}

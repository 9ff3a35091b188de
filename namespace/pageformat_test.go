package namespace

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParsePageFormat(t *testing.T) {
	for _, c := range []struct {
		in    string
		bytes uint64
		segs  []PageSegment
	}{
		{"kv:L32.S2.T64.H8.D128:fp8_e4m3", 32 * 2 * 64 * 8 * 128, []PageSegment{{Role: "kv", Elem: "fp8_e4m3",
			Axes: []PageAxis{{"L", 32}, {"S", 2}, {"T", 64}, {"H", 8}, {"D", 128}}}}},
		{"kv:S2.L32.T64.H8.D128:bf16;scale:L32.T64:fp32", 2*32*64*8*128*2 + 32*64*4, []PageSegment{
			{Role: "kv", Elem: "bf16", Axes: []PageAxis{{"S", 2}, {"L", 32}, {"T", 64}, {"H", 8}, {"D", 128}}},
			{Role: "scale", Elem: "fp32", Axes: []PageAxis{{"L", 32}, {"T", 64}}},
		}},
		{"hdr:B64:uint8;state_2:Xb3.Conv1:fp8_e8m0;k:T1:int64;v:T1:fp64;index:T2:int32", 64 + 3 + 8 + 8 + 8, []PageSegment{
			{Role: "hdr", Elem: "uint8", Axes: []PageAxis{{"B", 64}}},
			{Role: "state_2", Elem: "fp8_e8m0", Axes: []PageAxis{{"Xb", 3}, {"Conv", 1}}},
			{Role: "k", Elem: "int64", Axes: []PageAxis{{"T", 1}}},
			{Role: "v", Elem: "fp64", Axes: []PageAxis{{"T", 1}}},
			{Role: "index", Elem: "int32", Axes: []PageAxis{{"T", 2}}},
		}},
		{"b:B1073741824:uint8", MaxPageBytes, []PageSegment{{Role: "b", Elem: "uint8", Axes: []PageAxis{{"B", MaxPageBytes}}}}},
	} {
		f, err := ParsePageFormat(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(f.Segments, c.segs) || f.Bytes() != c.bytes || f.String() != c.in {
			t.Errorf("%q: %+v, %d bytes, %q; want %+v, %d bytes", c.in, f.Segments, f.Bytes(), f, c.segs, c.bytes)
		}
		var sum uint64
		for _, s := range f.Segments {
			sum += s.Bytes()
		}
		if sum != f.Bytes() || f.Segments[0].String() != strings.Split(c.in, ";")[0] {
			t.Errorf("%q: segments %d bytes, first %q", c.in, sum, f.Segments[0])
		}
	}
}

func TestParsePageFormatErrors(t *testing.T) {
	long := strings.Repeat("a", MaxPageFormatLen-len(":B1:uint8")+1) + ":B1:uint8"
	for _, c := range []struct{ in, want string }{
		{"", "page_format: empty"},
		{" kv:T1:bf16", `segment 1 " kv:T1:bf16": role " kv"`},
		{"kv:T1:bf16 ", `element "bf16 " is not canonical: write "bf16"`},
		{"kv:T1:bf16;", `segment 2 "": empty`},
		{";kv:T1:bf16", `segment 1 "": empty`},
		{"kv:T1", "want role:axes:elem (3 parts separated by ':'), got 2"},
		{"kv:T1:bf16:x", "got 4"},
		{"Kv:T1:bf16", `role "Kv": want [a-z][a-z0-9_]*`},
		{"1kv:T1:bf16", `role "1kv"`},
		{"k-v:T1:bf16", `role "k-v"`},
		{":T1:bf16", `role ""`},
		{"kv::bf16", `axis 1 "": want a name [A-Z][a-z]* and an extent`},
		{"kv:T1..H2:bf16", `axis 2 "": want a name`},
		{"kv:t1:bf16", `axis 1 "t1": want a name`},
		{"kv:TT1:bf16", `axis 1 "TT1": extent "T1" is not a decimal number`},
		{"kv:T:bf16", `axis 1 "T": no extent after the name "T"`},
		{"kv:T0:bf16", `extent "0": want an integer >= 1 without leading zeros`},
		{"kv:T01:bf16", `extent "01"`},
		{"kv:T+1:bf16", `extent "+1" is not a decimal number`},
		{"kv:T1e3:bf16", `extent "1e3" is not a decimal number`},
		{"kv:T99999999999999999999999:bf16", "extent 99999999999999999999999: describes more than 1073741824 bytes"},
		{"kv:T1073741825:uint8", "extent 1073741825: describes more than"},
		{"kv:T1073741824:bf16", `segment 1 "kv:T1073741824:bf16": describes more than 1073741824 bytes`},
		{"kv:T65536.D65536:uint8", "describes more than"},
		{"a:B1073741824:uint8;b:B1:uint8", "page_format: describes more than 1073741824 bytes (at segment 2)"},
		{"kv:T1:bfloat16", `element "bfloat16" is not canonical: write "bf16"`},
		{"kv:T1:torch.bf16", `element "torch.bf16" is not canonical: write "bf16"`},
		{"kv:T1:BF16", `element "BF16" is not canonical`},
		{"kv:T1:nvfp4", `element "nvfp4" has no known width (known: fp64, fp32`},
		{"kv:T1:", `element "" has no known width`},
		{"kv:A1.B1.C1.D1.E1.F1.G1.H1.I1:uint8", "9 axes; at most 8 allowed"},
		{strings.Repeat("k:T1:uint8;", MaxPageFormatSegments) + "k:T1:uint8", "65 segments; at most 64 allowed"},
		{long, "1025 bytes; at most 1024 allowed"},
		{"kv:T1:bf16\x00", `element "bf16\x00"`},
		{"kv:T1:bf16;kv:T1:é", `segment 2 "kv:T1:é": element "é" has no known width`},
	} {
		_, err := ParsePageFormat(c.in)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "page_format: ") ||
			!strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want an error with %q", c.in, err, c.want)
		}
	}
	// At the limits, and the largest format that fits.
	ok := []string{
		strings.Repeat("k:T1:uint8;", MaxPageFormatSegments-1) + "k:T1:uint8",
		"kv:A1.B1.C1.D1.E1.F1.G1.H1:uint8",
		strings.Repeat("a", MaxPageFormatLen-len(":B1:uint8")) + ":B1:uint8",
	}
	for _, s := range ok {
		if _, err := ParsePageFormat(s); err != nil {
			t.Errorf("%.40q…: %v", s, err)
		}
	}
}

// TestPageFormatDescriptor: page_format is part of the namespace: two
// serialisation orders of one KV are two namespaces, a descriptor without
// it keeps its ID, it is trimmed and nothing else, it survives Decode, it
// is a layout field (LayoutDiff, not ForkKey), and Validate checks its
// grammar and size against the page.
func TestPageFormatDescriptor(t *testing.T) {
	plain := llama3_8B()
	layerFirst := with(plain, func(d *Descriptor) { d.PageFormat = "kv:L32.S2.T16.H8.D128:bf16" })
	kvFirst := with(plain, func(d *Descriptor) { d.PageFormat = "kv:S2.L32.T16.H8.D128:bf16" })
	if bytes.Contains(plain.Canonical(), []byte("page_format")) {
		t.Fatal("an empty page_format is in the encoding")
	}
	if !bytes.Contains(layerFirst.Canonical(), []byte(`"page_bytes":0,"page_format":"kv:L32.S2.T16.H8.D128:bf16","page_tokens":16,`)) {
		t.Fatalf("encoding: %s", layerFirst.Canonical())
	}
	ids := map[ID]bool{plain.ID(): true, layerFirst.ID(): true, kvFirst.ID(): true}
	if len(ids) != 3 {
		t.Fatal("page formats do not separate namespaces")
	}
	for _, d := range []Descriptor{layerFirst, kvFirst} {
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
		got, err := Decode(d.Canonical())
		if err != nil || got.ID() != d.ID() || got.PageFormat != d.PageFormat {
			t.Fatalf("Decode: %+v, %v", got, err)
		}
		if d.ForkKey() != plain.ForkKey() {
			t.Error("page_format changes the fork key")
		}
	}
	if diff := LayoutDiff(layerFirst, kvFirst); !slices.Equal(diff, []string{"page_format"}) {
		t.Errorf("LayoutDiff = %q", diff)
	}
	if diff := LayoutDiff(plain, kvFirst); !slices.Equal(diff, []string{"page_format"}) {
		t.Errorf("LayoutDiff with no format = %q", diff)
	}
	padded := with(layerFirst, func(d *Descriptor) { d.PageFormat = "\t" + d.PageFormat + " \n" })
	if padded.ID() != layerFirst.ID() || padded.Normalize().PageFormat != layerFirst.PageFormat || padded.Validate() != nil {
		t.Error("page_format is not trimmed")
	}
	if with(plain, func(d *Descriptor) { d.PageFormat = " " }).ID() != plain.ID() {
		t.Error("a blank page_format is not the empty one")
	}
	// "page_format":"" spelled out is not canonical.
	spelled := strings.Replace(string(plain.Canonical()), `"page_bytes":0,`, `"page_bytes":0,"page_format":"",`, 1)
	if _, err := Decode([]byte(spelled)); !errors.Is(err, ErrInvalid) {
		t.Errorf("Decode accepted an empty page_format: %v", err)
	}

	for _, c := range []struct {
		name string
		d    Descriptor
		want string // "" = valid
	}{
		{"mha", layerFirst, ""},
		{"mla", with(deepseekV3(), func(d *Descriptor) { d.PageFormat = "latent:L61.T64.C576:bf16" }), ""},
		{"tp2", with(plain, func(d *Descriptor) { d.TPSize, d.PageFormat = 2, "kv:L32.S2.T16.H4.D128:bf16" }), ""},
		{"page_bytes", with(plain, func(d *Descriptor) {
			d.PageBytes, d.PageFormat = 2<<20+2048, "kv:L32.S2.T16.H8.D128:bf16;scale:L32.T16:fp32"
		}), ""},
		{"opaque dtype", Descriptor{Tenant: "t", Model: "m", DType: "nvfp4", PageTokens: 16, PageBytes: 4096,
			PageFormat: "kv:S2.T16.B128:uint8"}, ""},
		{"tp2 with tp1's format", with(plain, func(d *Descriptor) { d.TPSize, d.PageFormat = 2, layerFirst.PageFormat }),
			"page_format: describes 2097152 bytes, the page is 1048576 bytes"},
		{"page_bytes wins", with(plain, func(d *Descriptor) { d.PageBytes, d.PageFormat = 4096, layerFirst.PageFormat }),
			"page_format: describes 2097152 bytes, the page is 4096 bytes"},
		{"grammar", with(plain, func(d *Descriptor) { d.PageFormat = "kv:L32;S2:bf16" }), `page_format: segment 1 "kv:L32"`},
		// A geometry that gives no size is reported once, by its own rule.
		{"no geometry", with(plain, func(d *Descriptor) { d.NumLayers, d.PageFormat = 0, layerFirst.PageFormat }),
			"num_layers: must be > 0"},
	} {
		err := c.d.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: %v; want one error starting %q", c.name, err, c.want)
		}
	}
}

// FuzzParsePageFormat: ParsePageFormat never panics, what it accepts is
// canonical (String gives it back) and at most MaxPageBytes, and every
// refusal names the field.
func FuzzParsePageFormat(f *testing.F) {
	for _, s := range []string{
		"kv:L32.S2.T64.H8.D128:fp8_e4m3",
		"kv:S2.L32.T64.H8.D128:bf16;scale:L32.T64:fp32",
		"latent:L61.T64.C576:bf16",
		"kv:T01:bf16", "kv::bf16", ";", "kv:T1:bfloat16", "a:B1073741824:uint8;b:B1:uint8",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pf, err := ParsePageFormat(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "page_format: ") {
				t.Fatalf("%q: error %v", s, err)
			}
			return
		}
		if pf.String() != s {
			t.Fatalf("%q parses but prints as %q", s, pf)
		}
		if n := pf.Bytes(); n == 0 || n > MaxPageBytes {
			t.Fatalf("%q describes %d bytes", s, n)
		}
	})
}

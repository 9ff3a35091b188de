package membership

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

func TestMaxMetaSizeIsMemberlists(t *testing.T) {
	if MaxMetaSize != memberlist.MetaMaxSize {
		t.Fatalf("MaxMetaSize %d, memberlist.MetaMaxSize %d", MaxMetaSize, memberlist.MetaMaxSize)
	}
}

func TestMetaRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    wireMeta
	}{
		{"empty", wireMeta{Meta: Meta{NodeID: "n"}}},
		{"full", wireMeta{
			Meta: Meta{
				NodeID:      "n",
				GRPCAddress: "10.0.0.1:7000",
				Tiers: []TierMeta{
					{Kind: "gpu", Capacity: 80 << 30, Used: 1},
					{Kind: "host", Capacity: 1 << 40, Used: 0},
					{Kind: "ssd", Capacity: math.MaxInt64, Used: math.MaxInt64},
				},
				Summary: []byte{0, 1, 2, 255},
			},
			version: math.MaxUint32,
			leaving: true,
		}},
		{"raw address", wireMeta{Meta: Meta{NodeID: "n", GRPCAddress: "10.0.0.1:7000", RawAddress: "0.0.0.0:41234",
			Tiers: []TierMeta{{Kind: "host", Capacity: 1, Used: 0}}}, version: 2}},
		{"event stream", wireMeta{Meta: Meta{NodeID: "n", GRPCAddress: "10.0.0.1:7000", RawAddress: "0.0.0.0:41234",
			EventsIncarnation: 1 << 40, Summary: []byte{9}}, version: 3}},
		{"negative sizes survive", wireMeta{Meta: Meta{NodeID: "n", Tiers: []TierMeta{{Kind: "x", Capacity: -1, Used: math.MinInt64}}}, version: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := encodeMeta(tc.w)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeMeta("n", b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.w) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, tc.w)
			}
		})
	}
}

func TestMetaDecodeRejects(t *testing.T) {
	good, err := encodeMeta(wireMeta{Meta: Meta{GRPCAddress: "a:1", Tiers: []TierMeta{{Kind: "host", Capacity: 5, Used: 2}}}, version: 3})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":           nil,
		"format 0":        {0, 0, 1, 0, 0},
		"format 2":        append([]byte{2}, good[1:]...),
		"no flags":        {metaFormat},
		"huge version":    {metaFormat, 0, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0},
		"string too long": {metaFormat, 0, 1, 50, 'a'},
		"too many tiers":  {metaFormat, 0, 1, 0, 100, 1, 'h', 0, 0},
	}
	// Every proper prefix of a good encoding ends inside a field (the
	// summary is empty).
	for i := range len(good) {
		cases["prefix "+string(rune('0'+i))] = good[:i]
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if w, err := decodeMeta("n", b); !errors.Is(err, errBadMeta) {
				t.Errorf("decode %x = %+v, %v; want errBadMeta", b, w, err)
			}
		})
	}
}

func TestEncodeMetaLimit(t *testing.T) {
	m := Meta{GRPCAddress: "127.0.0.1:7000", Tiers: []TierMeta{{Kind: "ssd", Capacity: 1 << 40}}}
	budget := SummaryBudget(m)
	m.Summary = bytes.Repeat([]byte{9}, budget)
	if _, err := encodeMeta(wireMeta{Meta: m, version: math.MaxUint32, leaving: true}); err != nil {
		t.Fatalf("summary of the budget, widest header: %v", err)
	}
	m.Summary = append(m.Summary, 9)
	if _, err := encodeMeta(wireMeta{Meta: m, version: math.MaxUint32}); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("summary over the budget: %v", err)
	}
	if b := SummaryBudget(Meta{GRPCAddress: strings.Repeat("x", MaxMetaSize)}); b >= 0 {
		t.Errorf("budget for an oversized meta = %d, want < 0", b)
	}
}

// FuzzDecodeMeta checks that decoding never panics and that whatever
// decodes re-encodes to something that decodes the same.
func FuzzDecodeMeta(f *testing.F) {
	for _, w := range []wireMeta{
		{},
		{Meta: Meta{GRPCAddress: "h:1", Tiers: []TierMeta{{Kind: "gpu", Capacity: 1, Used: -1}}, Summary: []byte("s")}, version: 9, leaving: true},
	} {
		b, err := encodeMeta(w)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := decodeMeta("n", b)
		if err != nil {
			if !errors.Is(err, errBadMeta) {
				t.Fatalf("error %v is not errBadMeta", err)
			}
			return
		}
		again, err := encodeMeta(w)
		if err != nil {
			if len(b) > MaxMetaSize && errors.Is(err, ErrMetaTooLarge) {
				return
			}
			t.Fatalf("re-encoding %+v: %v", w, err)
		}
		w2, err := decodeMeta("n", again)
		if err != nil || !reflect.DeepEqual(w, w2) {
			t.Fatalf("re-decoded %+v, %v; want %+v", w2, err, w)
		}
	})
}

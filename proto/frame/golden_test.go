package frame

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stratakv/strata/namespace"
)

// goldenDir holds one JSON file per golden frame (golden).
const goldenDir = "testdata/golden"

// goldenCase is one golden frame: a message with a request id.
type goldenCase struct {
	name string
	id   uint64
	msg  Message
}

// goldenCases cover every op, every page, reserve and commit status, and
// an Error frame per code (and one with a code the spec does not list).
func goldenCases() []goldenCase {
	ns := namespace.ID{0: 0x5e, 31: 0xa1}
	k1 := namespace.Key{0: 1, 1: 2, 2: 3, 31: 0x10}
	k2 := namespace.Key{0: 0xff, 15: 0x80, 31: 0x01}
	sum := []byte{0xde, 0xad, 0xbe, 0xef}
	ext := Extent{Off: 1 << 20, Len: 256 << 10, Gen: 0x0102030405060708, GenIndex: 256}
	big := uint64(0x1122334455667788) // shows the byte order of a u64
	cases := []goldenCase{
		{"hello", 1, &Hello{Version: ProtocolVersion, Token: "tenant-a-token"}},
		{"hello_v2_no_token", 1, &Hello{Version: MinProtocolVersion}},
		{"welcome_tcp", 1, &Welcome{Version: 3, NodeID: "node-1", MaxBatch: 16384}},
		{"welcome_shm", 1, &Welcome{Version: 2, NodeID: "node-2", ArenaID: big, ArenaSize: 1 << 30, GenWords: 1 << 18, MaxBatch: 1000}},
		{"get", 2, &Get{NS: ns, Lease: 7, Keys: []namespace.Key{k1, k2}}},
		{"getok", 2, &GetOK{Pages: []PageLoc{
			{Status: PageMapped, Ext: ext, Checksum: sum},
			{Status: PageMissing},
			{Status: PageElse, Checksum: sum},
		}}},
		{"reserve", 3, &Reserve{NS: ns, TTLms: 30000, Pages: []PageSpec{
			{Key: k1, Depth: 0, Size: 4096, ChainDepth: 1, CostHint: 1.5e12},
			{Key: k2, Parent: k1, HasParent: true, Depth: 1, Size: 4096, ChainDepth: 1,
				Tokens: []uint32{1, 128000, 0xffffffff}, LoraName: "sql-lora", ExtraKeys: []byte{0x91, 0xa3, 'i', 'm', 'g'}},
		}}},
		{"reserve_v5", 3, &Reserve{version: EventVersion - 1, NS: ns, TTLms: 30000, Pages: []PageSpec{
			{Key: k1, Depth: 0, Size: 4096, ChainDepth: 1, CostHint: 1.5e12},
			{Key: k2, Parent: k1, HasParent: true, Depth: 1, Size: 4096, ChainDepth: 1},
		}}},
		{"reserve_v4", 3, &Reserve{version: CostHintVersion - 1, NS: ns, TTLms: 30000, Pages: []PageSpec{
			{Key: k1, Depth: 0, Size: 4096, ChainDepth: 1},
			{Key: k2, Parent: k1, HasParent: true, Depth: 1, Size: 4096, ChainDepth: 1},
		}}},
		{"reserveok", 3, &ReserveOK{Slots: []Slot{
			{Status: SlotReserved, WriteID: big, DeadlineMs: 1700000000123, Mapped: true, Ext: ext},
			{Status: SlotReserved, WriteID: 10, DeadlineMs: 1700000000123},
			{Status: SlotExists},
			{Status: SlotRejected, Reason: "page 0102030000: no space"},
		}}},
		{"commit", 4, &Commit{NS: ns, Items: []CommitItem{{WriteID: big, Size: 4096, Checksum: sum}, {WriteID: 10, Size: 1}}}},
		{"commitok", 4, &CommitOK{Statuses: []uint8{CommitCommitted, CommitExists, CommitChecksumMismatch, CommitSizeMismatch,
			CommitIncomplete, CommitUnknownWrite, CommitExpired, CommitAborted, CommitFailed}}},
		{"abort", 5, &Abort{NS: ns, WriteIDs: []uint64{big, 10}}},
		{"abortok", 5, &AbortOK{Aborted: 2}},
		{"served", 6, &Served{NS: ns, Pages: 3, Bytes: 3 << 18}},
		{"read", 7, &Read{NS: ns, Keys: []namespace.Key{k1, k2}}},
		{"read_lease", 8, &Read{NS: ns, Lease: big, Keys: []namespace.Key{k2}}},
		{"page_found", 7, &Page{Index: 0, Found: true, Checksum: sum, Data: []byte("page bytes")}},
		{"page_missing", 7, &Page{Index: 1}},
		{"write", 9, &Write{NS: ns, WriteID: 10, Offset: 4096, Data: []byte("more bytes")}},
		{"put", 11, &Put{NS: ns, TTLms: 500, Page: PageSpec{Key: k2, Parent: k1, HasParent: true, Depth: 1, ChainDepth: 4, Size: 10,
			CostHint: 0.75, Tokens: []uint32{7, 8, 9, 10}, LoraName: "sql-lora"}, Checksum: sum, Data: []byte("page bytes")}},
		{"put_v5", 11, &Put{version: EventVersion - 1, NS: ns, TTLms: 500, Page: PageSpec{Key: k2, Parent: k1, HasParent: true, Depth: 1,
			ChainDepth: 4, Size: 10, CostHint: 0.75}, Checksum: sum, Data: []byte("page bytes")}},
		{"put_v4", 11, &Put{version: CostHintVersion - 1, NS: ns, TTLms: 500,
			Page: PageSpec{Key: k2, Parent: k1, HasParent: true, Depth: 1, ChainDepth: 4, Size: 10}, Checksum: sum, Data: []byte("page bytes")}},
		{"put_root", 12, &Put{NS: ns, Page: PageSpec{Key: k1, Size: 1}, Data: []byte{0}}},
		{"putok_committed", 11, &PutOK{Reserve: SlotReserved, Commit: CommitCommitted}},
		{"putok_checksum_mismatch", 11, &PutOK{Reserve: SlotReserved, Commit: CommitChecksumMismatch, Reason: "checksum mismatch"}},
		{"putok_exists", 11, &PutOK{Reserve: SlotExists}},
		{"putok_rejected", 11, &PutOK{Reserve: SlotRejected, Reason: "page ff00: parent not admitted"}},
		{"lookup_lease", 13, &Lookup{NS: ns, Lease: true, LeaseTTLms: 300, Keys: []namespace.Key{k1, k2}}},
		{"lookup", 14, &Lookup{NS: ns, Keys: []namespace.Key{k1}}},
		{"lookupok_lease", 13, &LookupOK{HitPrefix: 1, LeaseID: big, ExpiresMs: 1700000000999, LeasePages: 1, Present: []bool{true, false}}},
		{"lookupok", 14, &LookupOK{Present: []bool{false}}},
		{"slotput", 15, &SlotPut{NS: ns, Want: 2, Pages: []SlotPage{
			{WriteID: big, Page: PageSpec{Key: k1, Size: 256 << 10, ChainDepth: 1, CostHint: 3e9, Tokens: []uint32{42}}, Checksum: sum},
			{WriteID: 10, Page: PageSpec{Key: k2, Parent: k1, HasParent: true, Depth: 1, Size: 4096, ChainDepth: 1, ExtraKeys: []byte{0xc0}}, Checksum: sum},
		}}},
		{"slotput_v5", 15, &SlotPut{version: EventVersion - 1, NS: ns, Want: 2, Pages: []SlotPage{
			{WriteID: big, Page: PageSpec{Key: k1, Size: 256 << 10, ChainDepth: 1, CostHint: 3e9}, Checksum: sum},
			{WriteID: 10, Page: PageSpec{Key: k2, Parent: k1, HasParent: true, Depth: 1, Size: 4096, ChainDepth: 1}, Checksum: sum},
		}}},
		{"slotput_v4", 15, &SlotPut{version: CostHintVersion - 1, NS: ns, Want: 2, Pages: []SlotPage{
			{WriteID: big, Page: PageSpec{Key: k1, Size: 256 << 10, ChainDepth: 1}, Checksum: sum},
			{WriteID: 10, Page: PageSpec{Key: k2, Parent: k1, HasParent: true, Depth: 1, Size: 4096, ChainDepth: 1}, Checksum: sum},
		}}},
		{"slotput_grant", 16, &SlotPut{NS: ns, Want: 4, Pages: []SlotPage{}}},
		{"slotputok", 15, &SlotPutOK{Results: []PutOK{
			{Reserve: SlotReserved, Commit: CommitCommitted},
			{Reserve: SlotExists},
			{Reserve: SlotReserved, Commit: CommitChecksumMismatch, Reason: "checksum mismatch"},
			{Reserve: SlotReserved, Commit: CommitUnknownWrite, Reason: "unknown write"},
		}, Slots: []Grant{
			{WriteID: big, DeadlineMs: 1700000000123, Ext: ext},
			{WriteID: 11, DeadlineMs: 1700000000124, Ext: Extent{Off: 3 << 18, Len: 256 << 10, Gen: 9, GenIndex: 3}},
		}}},
		{"slotputok_none", 16, &SlotPutOK{Results: []PutOK{}, Slots: []Grant{}}},
	}
	for c := CodeInternal; c <= Codes; c++ {
		cases = append(cases, goldenCase{"error_" + strings.ToLower(c.String()), 20 + uint64(c),
			&Error{Code: c, Message: "refused: " + strings.ToLower(c.String())}})
	}
	return append(cases, goldenCase{"error_unknown_code", 99, &Error{Code: 999, Message: "a code from the future"}})
}

// golden is one file of testdata/golden.
type golden struct {
	Name    string `json:"name"`
	Message string `json:"message"`
	Op      uint8  `json:"op"`
	ID      uint64 `json:"id"`
	// ConnVersion is the connection version the frame is laid out for,
	// where its layout depends on it (Versioned) and is not
	// ProtocolVersion's.
	ConnVersion uint16         `json:"conn_version,omitempty"`
	CodeName    string         `json:"code_name,omitempty"` // Error frames: the code's name in SPEC.md §6
	Fields      map[string]any `json:"fields"`
	Hex         string         `json:"hex"`
}

func goldenOf(name string, id uint64, m Message) golden {
	var v version
	if f := reflect.ValueOf(m).Elem().FieldByName("version"); f.IsValid() {
		v = version(f.Uint())
	}
	g := golden{Name: name, Message: reflect.TypeOf(m).Elem().Name(), Op: m.Op(), ID: id, ConnVersion: uint16(v),
		Fields: fieldsOf(reflect.ValueOf(m).Elem(), v), Hex: hex.EncodeToString(Append(nil, id, m))}
	if e, ok := m.(*Error); ok {
		g.CodeName = e.Code.String()
		if !e.Code.known() {
			g.CodeName = ""
		}
	}
	return g
}

func (g golden) encode() []byte {
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// fieldName is a Go field's name in the golden files: snake case, as the
// spec spells the fields.
func fieldName(s string) string {
	switch s {
	case "NS":
		return "ns"
	case "TTLms":
		return "ttl_ms"
	case "LeaseTTLms":
		return "lease_ttl_ms"
	}
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 && (unicode.IsLower(r[i-1]) || (i+1 < len(r) && unicode.IsLower(r[i+1]) && r[i+1] != 's')) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// fieldsOf is a message's fields as JSON values: integers, floats and
// booleans as they are, keys, checksums and data as hex, lists as arrays,
// structs as objects. Statuses (a []uint8) is a list of numbers. A
// message's version is not a field (ConnVersion), nor is a field its
// version does not carry (a cost hint before CostHintVersion, event info
// before EventVersion).
func fieldsOf(v reflect.Value, at version) map[string]any {
	out := make(map[string]any)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		switch {
		case !f.IsExported(), f.Name == "CostHint" && !at.costHint():
			continue
		case (f.Name == "Tokens" || f.Name == "LoraName" || f.Name == "ExtraKeys") && !at.events():
			continue
		}
		out[fieldName(f.Name)] = valueOf(f.Name, v.Field(i), at)
	}
	return out
}

func valueOf(name string, v reflect.Value, at version) any {
	switch v.Kind() {
	case reflect.Struct:
		return fieldsOf(v, at)
	case reflect.Array:
		b := make([]byte, v.Len())
		reflect.Copy(reflect.ValueOf(b), v)
		return hex.EncodeToString(b)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 && name != "Statuses" {
			return hex.EncodeToString(v.Bytes())
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = valueOf(name, v.Index(i), at)
		}
		return out
	}
	return v.Interface()
}

var update = flag.Bool("update", false, "rewrite testdata/golden and testdata/malformed.jsonl from the cases here")

// TestGolden checks every golden frame byte for byte: the case encodes to
// the file's hex, and the file's hex decodes to the case's message and
// fields. With -update it rewrites the files instead.
func TestGolden(t *testing.T) {
	cases := goldenCases()
	if *update {
		if err := os.RemoveAll(goldenDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			if err := os.WriteFile(filepath.Join(goldenDir, c.name+".json"), goldenOf(c.name, c.id, c.msg).encode(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(cases) {
		t.Errorf("%d golden files for %d cases: run go test -run TestGolden -update", len(files), len(cases))
	}
	ops := make(map[uint8]bool)
	for _, c := range cases {
		ops[c.msg.Op()] = true
		path := filepath.Join(goldenDir, c.name+".json")
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v (run go test -run TestGolden -update)", c.name, err)
			continue
		}
		if got := goldenOf(c.name, c.id, c.msg).encode(); !bytes.Equal(got, want) {
			t.Errorf("%s: encoding differs from %s:\n%s", c.name, path, got)
			continue
		}
		var g golden
		if err := json.Unmarshal(want, &g); err != nil {
			t.Fatal(err)
		}
		b, err := hex.DecodeString(g.Hex)
		if err != nil {
			t.Fatal(err)
		}
		id, m, err := decodeAt(b, cmp.Or(g.ConnVersion, ProtocolVersion))
		if err != nil {
			t.Errorf("%s: decoding the golden frame: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(m, c.msg) || id != c.id {
			t.Errorf("%s: decoded id %d %#v, want %d %#v", c.name, id, m, c.id, c.msg)
		}
		if got := goldenOf(c.name, id, m).encode(); !bytes.Equal(got, want) {
			t.Errorf("%s: decoded fields differ from %s:\n%s", c.name, path, got)
		}
	}
	for op := uint8(1); NewMessage(op) != nil; op++ {
		if !ops[op] {
			t.Errorf("op %d has no golden frame", op)
		}
	}
}

// malformed are frames every decoder rejects (python/tests/test_frame.py
// reads them too): one per rule of SPEC.md §1.
func malformed() []golden {
	good := Append(nil, 1, &Get{NS: namespace.ID{1}, Keys: []namespace.Key{{1}, {2}}})
	mod := func(b []byte, f func(b []byte) []byte) []byte { return f(bytes.Clone(b)) }
	withBody := func(op uint8, body []byte) []byte {
		b := appendHeader(nil, op, 1)
		b = append(b, body...)
		return mod(b, func(b []byte) []byte { b[0] = byte(len(b) - 4); return b })
	}
	ok := Append(nil, 1, &ReserveOK{Slots: []Slot{{}}})
	present := Append(nil, 1, &LookupOK{Present: []bool{true, false, true}})
	var huge [8]byte
	for i := range huge {
		huge[i] = 0xff
	}
	cases := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short_header", good[:10]},
		{"truncated_body", mod(good, func(b []byte) []byte { b[0]--; return b[:len(b)-1] })},
		{"length_past_the_end", good[:len(good)-1]},
		{"trailing_byte", mod(good, func(b []byte) []byte { b[0]++; return append(b, 0) })},
		{"nonzero_padding", mod(good, func(b []byte) []byte { b[6] = 1; return b })},
		{"unknown_op", mod(good, func(b []byte) []byte { b[4] = 99; return b })},
		{"op_zero", mod(good, func(b []byte) []byte { b[4] = 0; return b })},
		{"count_too_large", mod(good, func(b []byte) []byte { b[len(b)-2*32-4] = 200; return b })},
		{"bad_boolean", mod(ok, func(b []byte) []byte { b[HeaderSize+4+1+8+8] = 2; return b })},
		{"bad_boolean_in_list", mod(present, func(b []byte) []byte { b[len(b)-2] = 2; return b })},
		{"truncated_key_list", withBody(OpLookup, append(append(make([]byte, 32+1+4), 2, 0, 0, 0), make([]byte, 32+31)...))},
		{"n64_too_large", withBody(OpServed, append(append(make([]byte, 32), 0, 0, 0, 0), huge[:]...))},
		{"missing_page_with_data", withBody(OpPage, []byte{0, 0, 0, 0, 0, 0, 'x'})},
		{"truncated_str", withBody(OpError, []byte{1, 0, 5, 0, 'a'})},
	}
	out := make([]golden, len(cases))
	for i, c := range cases {
		out[i] = golden{Name: c.name, Hex: hex.EncodeToString(c.b)}
	}
	return out
}

// TestMalformed: each malformed frame is rejected with ErrMalformed, and
// testdata/golden_malformed.json lists them (rewritten with -update).
func TestMalformed(t *testing.T) {
	cases := malformed()
	var b bytes.Buffer
	for _, c := range cases {
		fmt.Fprintf(&b, "{\"name\": %q, \"hex\": %q}\n", c.Name, c.Hex)
		raw, _ := hex.DecodeString(c.Hex)
		if _, m, err := Decode(raw); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: decoded %#v, %v; want ErrMalformed", c.Name, m, err)
		}
	}
	path := "testdata/malformed.jsonl"
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want, err := os.ReadFile(path); err != nil || !bytes.Equal(want, b.Bytes()) {
		t.Errorf("%s differs from the cases (%v): run go test -run TestMalformed -update", path, err)
	}
}

// TestSpecTables checks the tables of SPEC.md against the code: the ops
// (number, message name, version), the statuses and the error codes.
func TestSpecTables(t *testing.T) {
	spec, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	tables := specTables(string(spec))
	var ops []string
	for op := uint8(1); NewMessage(op) != nil; op++ {
		since := MinProtocolVersion
		switch {
		case op >= OpSlotPut:
			since = 4
		case op >= OpPut:
			since = 3
		}
		ops = append(ops, fmt.Sprintf("%d %s %d", op, reflect.TypeOf(NewMessage(op)).Elem().Name(), since))
	}
	var versions []string
	for v := MinProtocolVersion; v <= ProtocolVersion; v++ {
		versions = append(versions, fmt.Sprint(v))
	}
	var codes []string
	for c := CodeInternal; c <= Codes; c++ {
		codes = append(codes, fmt.Sprintf("%d %s %s", c, c, c.Reason()))
	}
	for _, tc := range []struct {
		table string
		cols  []int
		want  []string
	}{
		{"Ops", []int{0, 1, 3}, ops},
		{"Page status", []int{0, 1}, []string{
			fmt.Sprint(PageMissing, " MISSING"), fmt.Sprint(PageMapped, " MAPPED"), fmt.Sprint(PageElse, " ELSE")}},
		{"Reserve status", []int{0, 1}, []string{
			fmt.Sprint(SlotReserved, " RESERVED"), fmt.Sprint(SlotExists, " EXISTS"), fmt.Sprint(SlotRejected, " REJECTED")}},
		{"Commit status", []int{0, 1}, []string{
			fmt.Sprint(CommitCommitted, " COMMITTED"), fmt.Sprint(CommitExists, " EXISTS"),
			fmt.Sprint(CommitChecksumMismatch, " CHECKSUM_MISMATCH"), fmt.Sprint(CommitSizeMismatch, " SIZE_MISMATCH"),
			fmt.Sprint(CommitIncomplete, " INCOMPLETE"), fmt.Sprint(CommitUnknownWrite, " UNKNOWN_WRITE"),
			fmt.Sprint(CommitExpired, " EXPIRED"), fmt.Sprint(CommitAborted, " ABORTED"), fmt.Sprint(CommitFailed, " FAILED")}},
		{"Error codes", []int{0, 1, 2}, codes},
		{"Versions", []int{0}, versions},
	} {
		var got []string
		for _, row := range tables[tc.table] {
			var cells []string
			for _, c := range tc.cols {
				cells = append(cells, row[c])
			}
			got = append(got, strings.Join(cells, " "))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("SPEC.md table %q:\n got %q\nwant %q", tc.table, got, tc.want)
		}
	}
}

var (
	specRow  = regexp.MustCompile(`^\|\s*(\d+)\s*\|`)
	specCell = regexp.MustCompile(`[^\\]\|`) // a cell ends at a | not escaped
)

// specTables are SPEC.md's tables whose rows start with a number, by the
// text that introduces them: the heading or sentence above ("Ops" for §2's
// table, "Error codes" for §6's, "Page status" for "Page status, in
// GetOK:"), each row's cells trimmed of spaces and backquotes.
func specTables(spec string) map[string][][]string {
	out := make(map[string][][]string)
	title := ""
	for _, line := range strings.Split(spec, "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			title = strings.TrimSpace(strings.TrimLeft(strings.TrimLeft(line, "# "), "0123456789. "))
		case line != "" && !strings.HasPrefix(line, "|") && strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " "):
			title, _, _ = strings.Cut(strings.TrimSuffix(line, ":"), ",")
		case specRow.MatchString(line):
			cells := specCell.Split(strings.Trim(line, "|"), -1)
			for i := range cells {
				cells[i] = strings.Trim(cells[i], " `")
			}
			out[title] = append(out[title], cells)
		}
	}
	return out
}

package namespace

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// A page format (descriptor field "page_format") says how one page's bytes
// are laid out: the tensors an engine adapter copies into a page, each as
// a role, its axes outermost first with their extents, and its element
// type, in the order their bytes follow one another. Adapters derive it
// from the tensors they copy, so two serialisations of the same KV (layer
// first or K/V first, fp8 bytes or their uint8 view) can never share a
// namespace: the format is part of the canonical encoding. README.md
// ("Page format") is the specification:
//
//	page_format = segment *( ";" segment )
//	segment     = role ":" axes ":" elem
//	role        = [a-z][a-z0-9_]*
//	axes        = axis *( "." axis )
//	axis        = name extent          name = [A-Z][a-z]*, extent = [1-9][0-9]*
//	elem        = a canonical dtype name with a known width (DTypeBytes)
//
// for example "kv:L32.S2.T64.H8.D128:fp8_e4m3" or
// "kv:S2.L32.T64.H8.D128:bf16;scale:L32.T64:fp32". A segment holds
// product(extents) × width(elem) bytes and the page is the segments one
// after another, so a format's size must equal the page size.

// Limits on a page format, enforced by ParsePageFormat.
const (
	MaxPageFormatLen      = 1024 // bytes in the page_format string
	MaxPageFormatSegments = 64   // segments in a page format
	MaxPageFormatAxes     = 8    // axes in one segment
)

// PageFormat is a parsed page format: its segments in the order their
// bytes are serialised.
type PageFormat struct {
	Segments []PageSegment
}

// PageSegment is one tensor of a page: its role ("kv", "k", "v",
// "latent", "index", "scale", "state", "hdr", ...), its axes outermost
// first (the last one is contiguous) and its element dtype.
type PageSegment struct {
	Role string
	Axes []PageAxis
	Elem string // a canonical dtype name, e.g. "bf16", "fp8_e4m3"
}

// PageAxis is one axis of a segment: a name ("S" the K/V stack, "L" layer,
// "T" token, "H" head, "D" head dim, "C" latent or channel width, "B"
// bytes, ...) and its extent, at least 1.
type PageAxis struct {
	Name   string
	Extent uint64
}

// ParsePageFormat parses a page format exactly as written: it trims
// nothing and accepts only the canonical form (so String gives s back). It
// checks the grammar, the limits (MaxPageFormatLen, MaxPageFormatSegments,
// MaxPageFormatAxes), that every element dtype is canonical and has a known
// width, and that the format describes at most MaxPageBytes. Errors start
// with "page_format:", say what is wrong and where, and wrap ErrInvalid.
func ParsePageFormat(s string) (PageFormat, error) {
	if s == "" {
		return PageFormat{}, fieldErr("page_format", "empty")
	}
	if len(s) > MaxPageFormatLen {
		return PageFormat{}, fieldErr("page_format", "%d bytes; at most %d allowed", len(s), MaxPageFormatLen)
	}
	parts := strings.Split(s, ";")
	if len(parts) > MaxPageFormatSegments {
		return PageFormat{}, fieldErr("page_format", "%d segments; at most %d allowed", len(parts), MaxPageFormatSegments)
	}
	f := PageFormat{Segments: make([]PageSegment, len(parts))}
	var total uint64
	for i, p := range parts {
		seg, err := parsePageSegment(p)
		if err != nil {
			return PageFormat{}, fieldErr("page_format", "segment %d %q: %s", i+1, p, err)
		}
		f.Segments[i] = seg
		if total += seg.Bytes(); total > MaxPageBytes {
			return PageFormat{}, fieldErr("page_format", "describes more than %d bytes (at segment %d)", MaxPageBytes, i+1)
		}
	}
	return f, nil
}

// parsePageSegment parses role:axes:elem. Its errors are plain messages
// (ParsePageFormat says which segment).
func parsePageSegment(s string) (PageSegment, error) {
	if s == "" {
		return PageSegment{}, errors.New("empty")
	}
	fields := strings.Split(s, ":")
	if len(fields) != 3 {
		return PageSegment{}, fmt.Errorf("want role:axes:elem (3 parts separated by ':'), got %d", len(fields))
	}
	role, axes, elem := fields[0], fields[1], fields[2]
	if !isRole(role) {
		return PageSegment{}, fmt.Errorf("role %q: want [a-z][a-z0-9_]*", role)
	}
	w, ok := DTypeBytes(elem)
	switch {
	case !ok:
		return PageSegment{}, fmt.Errorf("element %q has no known width (known: %s)", elem, knownDTypes)
	case normDType(elem) != elem:
		return PageSegment{}, fmt.Errorf("element %q is not canonical: write %q", elem, normDType(elem))
	}
	names := strings.Split(axes, ".")
	if len(names) > MaxPageFormatAxes {
		return PageSegment{}, fmt.Errorf("%d axes; at most %d allowed", len(names), MaxPageFormatAxes)
	}
	seg := PageSegment{Role: role, Axes: make([]PageAxis, len(names)), Elem: elem}
	n := w
	for j, a := range names {
		ax, err := parsePageAxis(a)
		if err != nil {
			return PageSegment{}, fmt.Errorf("axis %d %q: %w", j+1, a, err)
		}
		seg.Axes[j] = ax
		if n = mulCapped(n, ax.Extent); n > MaxPageBytes {
			return PageSegment{}, fmt.Errorf("describes more than %d bytes", MaxPageBytes)
		}
	}
	return seg, nil
}

// parsePageAxis parses a name and its extent: "L32", "Xb3".
func parsePageAxis(s string) (PageAxis, error) {
	i := 0
	if i < len(s) && s[i] >= 'A' && s[i] <= 'Z' {
		i++
		for i < len(s) && s[i] >= 'a' && s[i] <= 'z' {
			i++
		}
	}
	if i == 0 {
		return PageAxis{}, errors.New("want a name [A-Z][a-z]* and an extent")
	}
	name, digits := s[:i], s[i:]
	switch {
	case digits == "":
		return PageAxis{}, fmt.Errorf("no extent after the name %q", name)
	case strings.Trim(digits, "0123456789") != "":
		return PageAxis{}, fmt.Errorf("extent %q is not a decimal number", digits)
	case digits[0] == '0':
		return PageAxis{}, fmt.Errorf("extent %q: want an integer >= 1 without leading zeros", digits)
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n > MaxPageBytes {
		return PageAxis{}, fmt.Errorf("extent %s: describes more than %d bytes", digits, MaxPageBytes)
	}
	return PageAxis{Name: name, Extent: n}, nil
}

// isRole reports whether s matches [a-z][a-z0-9_]*.
func isRole(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// mulCapped is a×b, or math.MaxUint64 when that overflows.
func mulCapped(a, b uint64) uint64 {
	if b != 0 && a > math.MaxUint64/b {
		return math.MaxUint64
	}
	return a * b
}

// Bytes is the size the segment describes: the product of its extents
// times its element's width (math.MaxUint64 when that overflows; 0 for an
// element of unknown width). For a segment ParsePageFormat returned it is
// at most MaxPageBytes.
func (s PageSegment) Bytes() uint64 {
	w, _ := DTypeBytes(s.Elem)
	n := w
	for _, a := range s.Axes {
		n = mulCapped(n, a.Extent)
	}
	return n
}

// Bytes is the size the format describes, the sum of its segments'
// (math.MaxUint64 when that overflows). For a format ParsePageFormat
// returned it is at most MaxPageBytes.
func (f PageFormat) Bytes() uint64 {
	var n uint64
	for _, s := range f.Segments {
		b := s.Bytes()
		if n > math.MaxUint64-b {
			return math.MaxUint64
		}
		n += b
	}
	return n
}

// String is the format as written in descriptors; for a format
// ParsePageFormat returned, the string it parsed.
func (f PageFormat) String() string {
	var b strings.Builder
	for i, s := range f.Segments {
		if i > 0 {
			b.WriteByte(';')
		}
		s.appendTo(&b)
	}
	return b.String()
}

// String is the segment as written in a page format: "kv:L32.S2.T64.H8.D128:bf16".
func (s PageSegment) String() string {
	var b strings.Builder
	s.appendTo(&b)
	return b.String()
}

func (s PageSegment) appendTo(b *strings.Builder) {
	b.WriteString(s.Role)
	b.WriteByte(':')
	for j, a := range s.Axes {
		if j > 0 {
			b.WriteByte('.')
		}
		b.WriteString(a.Name)
		b.WriteString(strconv.FormatUint(a.Extent, 10))
	}
	b.WriteByte(':')
	b.WriteString(s.Elem)
}

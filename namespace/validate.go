package namespace

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"
)

// Validate checks the normalized descriptor against every rule below and
// returns nil or an error that wraps ErrInvalid (errors.Is) and names, for
// each broken rule, the canonical field name and the rule, one per line:
//
//   - tenant and model are required;
//   - every string is valid UTF-8 and at most MaxStringLen bytes;
//   - extra has at most MaxExtraEntries entries; keys are non-empty, valid
//     UTF-8 and at most MaxExtraKeyLen bytes; values are valid UTF-8 and at
//     most MaxExtraValueLen bytes;
//   - page_tokens is in [1, MaxPageTokens];
//   - tp_rank < tp_size, pp_rank < pp_size, cp_rank < cp_size;
//   - MLA (mla_latent_dim > 0) omits TP: the latent is replicated on every
//     TP rank, so tp_size must be 1 and tp_rank 0, and num_kv_heads and
//     head_dim must be 0 (one geometry, not two);
//   - checksum is crc32c or sha256;
//   - key_format is sha256-chain or sha256-blocks, and with sha256-blocks
//     page_tokens is a multiple of 16 (a page is whole SHA-256 blocks);
//   - page_format, when set, parses (ParsePageFormat: grammar, limits,
//     element dtypes) and describes exactly the page size (page_bytes when
//     set, else the size the geometry gives);
//   - page_bytes, when set, is at most MaxPageBytes (1 GiB);
//   - when page_bytes is 0: dtype and kv_dtype are known dtypes (see
//     DTypeBytes) and the geometry gives a page size in [1, MaxPageBytes]
//     (see PageSize for the formula and its divisibility rules).
func (d Descriptor) Validate() error {
	n := d.Normalize()
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(n.validateStrings())
	add(n.validateExtra())
	add(n.validateShards())
	if n.Checksum != CRC32C && n.Checksum != SHA256 {
		add(fieldErr("checksum", "unknown algorithm %d; want crc32c or sha256", n.Checksum))
	}
	switch n.KeyFormat {
	case KeyChain:
	case KeyBlocks:
		if n.PageTokens%keyBlockTokens != 0 {
			add(fieldErr("key_format", "sha256-blocks needs page_tokens a multiple of %d (whole SHA-256 blocks a page), got %d", keyBlockTokens, n.PageTokens))
		}
	default:
		add(fieldErr("key_format", "unknown format %d; want sha256-chain or sha256-blocks", n.KeyFormat))
	}
	add(n.validateGeometry())
	add(n.validatePageFormat())
	return errors.Join(errs...)
}

// validatePageFormat checks that a stated page format parses and that its
// size is the page's. A page whose size the geometry does not give is
// reported by validateGeometry, not here.
func (d *Descriptor) validatePageFormat() error {
	if d.PageFormat == "" {
		return nil
	}
	f, err := ParsePageFormat(d.PageFormat)
	if err != nil {
		return err
	}
	page := d.PageBytes
	if page == 0 {
		if d.PageTokens == 0 || d.PageTokens > MaxPageTokens {
			return nil
		}
		if page, err = d.derivedPageSize(); err != nil {
			return nil
		}
	}
	if page > MaxPageBytes {
		return nil
	}
	if n := f.Bytes(); n != page {
		return fieldErr("page_format", "describes %d bytes, the page is %d bytes", n, page)
	}
	return nil
}

func (d *Descriptor) validateStrings() error {
	var errs []error
	if d.Tenant == "" {
		errs = append(errs, fieldErr("tenant", "required"))
	}
	if d.Model == "" {
		errs = append(errs, fieldErr("model", "required"))
	}
	for _, f := range [...]struct{ name, v string }{
		{"tenant", d.Tenant},
		{"model", d.Model},
		{"model_revision", d.ModelRevision},
		{"adapter", d.Adapter},
		{"adapter_revision", d.AdapterRevision},
		{"tokenizer_revision", d.TokenizerRevision},
		{"engine", d.Engine},
		{"dtype", d.DType},
		{"kv_dtype", d.KVDType},
		{"layout", d.Layout},
		{"quantization", d.Quantization},
	} {
		if err := checkString(f.name, f.v, MaxStringLen); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (d *Descriptor) validateExtra() error {
	if len(d.Extra) > MaxExtraEntries {
		return fieldErr("extra", "%d entries; at most %d allowed", len(d.Extra), MaxExtraEntries)
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(d.Extra)) {
		if k == "" {
			errs = append(errs, fieldErr("extra", "empty key"))
			continue
		}
		if err := checkString("extra", k, MaxExtraKeyLen); err != nil {
			errs = append(errs, fmt.Errorf("key %q: %w", truncate(k), err))
		}
		if err := checkString("extra", d.Extra[k], MaxExtraValueLen); err != nil {
			errs = append(errs, fmt.Errorf("value of %q: %w", truncate(k), err))
		}
	}
	return errors.Join(errs...)
}

func (d *Descriptor) validateShards() error {
	var errs []error
	if d.PageTokens == 0 || d.PageTokens > MaxPageTokens {
		errs = append(errs, fieldErr("page_tokens", "%d; must be in [1, %d]", d.PageTokens, MaxPageTokens))
	}
	for _, s := range [...]struct {
		rank, size string
		r, n       uint32
	}{
		{"tp_rank", "tp_size", d.TPRank, d.TPSize},
		{"pp_rank", "pp_size", d.PPRank, d.PPSize},
		{"cp_rank", "cp_size", d.CPRank, d.CPSize},
	} {
		if s.r >= s.n {
			errs = append(errs, fieldErr(s.rank, "%d must be < %s %d", s.r, s.size, s.n))
		}
	}
	if d.IsMLA() {
		if d.TPSize != 1 || d.TPRank != 0 {
			errs = append(errs, fieldErr("tp_size", "MLA omits TP (the latent is replicated on every TP rank): want tp_size 1 and tp_rank 0, got %d and %d", d.TPSize, d.TPRank))
		}
		if d.NumKVHeads != 0 || d.HeadDim != 0 {
			errs = append(errs, fieldErr("mla_latent_dim", "set together with num_kv_heads/head_dim; an MLA descriptor gives only mla_latent_dim"))
		}
	}
	return errors.Join(errs...)
}

func (d *Descriptor) validateGeometry() error {
	if d.PageBytes > 0 {
		if d.PageBytes > MaxPageBytes {
			return fieldErr("page_bytes", "%d; at most %d allowed", d.PageBytes, MaxPageBytes)
		}
		return nil
	}
	if _, ok := DTypeBytes(d.DType); !ok {
		return fieldErr("dtype", "%q is not a known dtype (known: %s); declare page_bytes for other dtypes", d.DType, knownDTypes)
	}
	if d.PageTokens == 0 || d.PageTokens > MaxPageTokens {
		return nil // reported by validateShards
	}
	_, err := d.derivedPageSize()
	return err
}

// checkString reports a string that is not valid UTF-8 or is too long.
func checkString(field, s string, maxLen int) error {
	if !utf8.ValidString(s) {
		return fieldErr(field, "not valid UTF-8")
	}
	if len(s) > maxLen {
		return fieldErr(field, "%d bytes; at most %d allowed", len(s), maxLen)
	}
	return nil
}

// fieldErr builds a validation error: "field: rule: invalid namespace
// descriptor".
func fieldErr(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", field, fmt.Sprintf(format, args...), ErrInvalid)
}

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

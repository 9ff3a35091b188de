package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/proto/pbconv"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// Widths of shortened hex in tables: enough to tell rows apart, and what
// `ns show`/`keys ls` accept back as a prefix.
const (
	shortIDHex  = 12
	shortKeyHex = 16
)

// none stands in tables for an empty or unknown value.
const none = "-"

// newTable returns a tab-separated table writer over w; Flush prints it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// row writes one table row.
func row(w io.Writer, cells ...any) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		fmt.Fprint(w, c)
	}
	io.WriteString(w, "\n")
}

// writeJSON prints v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// hexOf is b in lowercase hex; "" for no bytes.
func hexOf(b []byte) string { return hex.EncodeToString(b) }

// shortHex is the first n hex digits of b, or none for no bytes.
func shortHex(b []byte, n int) string {
	s := hex.EncodeToString(b)
	switch {
	case s == "":
		return none
	case len(s) > n:
		return s[:n]
	}
	return s
}

// orNone is s, or none when s is empty.
func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// humanBytes writes n in binary units: 512B, 16KiB, 1.5MiB.
func humanBytes(n uint64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return strconv.FormatUint(n, 10) + "B"
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if strings.HasSuffix(s, ".0") {
		s = s[:len(s)-2]
	}
	return s + string(units[i]) + "iB"
}

// hitRate is the share of looked-up keys that were hits, or ok false when
// nothing was looked up.
func hitRate(info *pb.NamespaceInfo) (pct float64, ok bool) {
	if info.GetLookupKeys() == 0 {
		return 0, false
	}
	return 100 * float64(info.GetHitKeys()) / float64(info.GetLookupKeys()), true
}

// formatHitRate is the hit rate as "87.5%", or none before any lookup.
func formatHitRate(info *pb.NamespaceInfo) string {
	pct, ok := hitRate(info)
	if !ok {
		return none
	}
	return strconv.FormatFloat(pct, 'f', 1, 64) + "%"
}

// formatAge is d rounded down to its largest unit: 42s, 5m, 3h, 12d.
func formatAge(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// ageOf is the age of a Unix-millisecond time at now, or none for zero.
func ageOf(unixMs int64, now time.Time) string {
	if unixMs == 0 {
		return none
	}
	return formatAge(now.Sub(time.UnixMilli(unixMs)))
}

// formatTime is a Unix-millisecond time in UTC with its age, or none.
func formatTime(unixMs int64, now time.Time) string {
	if unixMs == 0 {
		return none
	}
	t := time.UnixMilli(unixMs).UTC()
	return t.Format("2006-01-02T15:04:05.000Z") + " (" + formatAge(now.Sub(t)) + " ago)"
}

// enumName is a protobuf enum value as the CLI prints it: its name in
// lower case, without the prefix its type's values share; the zero value
// (UNSPECIFIED) is unspecified.
func enumName[E interface {
	~int32
	String() string
}](e E, prefix, unspecified string) string {
	if e == 0 {
		return unspecified
	}
	return strings.ToLower(strings.TrimPrefix(e.String(), prefix))
}

// tierName is "gpu", "host" or "ssd"; "unspecified" for the zero value.
func tierName(t pb.Tier) string { return enumName(t, "TIER_", "unspecified") }

// checksumName is "crc32c" or "sha256"; unspecified means CRC-32C.
func checksumName(a pb.ChecksumAlgorithm) string { return enumName(a, "CHECKSUM_ALGORITHM_", "crc32c") }

// keyFormatName is the descriptor's key format as descriptors spell it;
// UNSPECIFIED is sha256-chain, the default.
func keyFormatName(f pb.KeyFormat) string {
	k := pbconv.KeyFormat(f)
	if k == 0 {
		k = namespace.KeyChain
	}
	return k.String()
}

// stateName is "alive", "suspect", "dead" or "left".
func stateName(s pb.MemberState) string { return enumName(s, "MEMBER_STATE_", "unspecified") }

// usage is a tier's use as "12MiB/1GiB".
func usage(used, capacity uint64) string {
	return humanBytes(used) + "/" + humanBytes(capacity)
}

// percent is part of whole as "12.5%", or none when whole is zero.
func percent(part, whole uint64) string {
	if whole == 0 {
		return none
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 1, 64) + "%"
}

// formatTTL is an idle TTL in milliseconds as "1h30m0s", or "none".
func formatTTL(ms uint64) string {
	if ms == 0 {
		return "none"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// report writes doc as JSON, or as text for people, then returns failed
// (some nodes did not do their part) ahead of any write error, so that the
// exit status says the command did not complete.
func (g *globals) report(cmd *cobra.Command, doc any, text func(io.Writer) error, failed error) error {
	var err error
	if g.json() {
		err = writeJSON(cmd.OutOrStdout(), doc)
	} else {
		err = text(cmd.OutOrStdout())
	}
	if failed != nil {
		return failed
	}
	return err
}

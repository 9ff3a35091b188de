package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// columns are the table's headings and each result's cells.
var columns = []struct {
	head string
	cell func(r result) string
}{
	{"N", func(r result) string { return strconv.Itoa(r.N) }},
	{"start: sample sees all (s)", func(r result) string { return r.Start.String() }},
	{"then see all", func(r result) string { return fmt.Sprintf("%d/%d", r.Start.Saw, r.Start.Of) }},
	{"gossip B/node/s", func(r result) string { return f0(r.GossipBytes) }},
	{"gossip msgs/node/s", func(r result) string { return fmt.Sprintf("%.1f", r.GossipMsgs) }},
	{"client view updates/s", func(r result) string { return fmt.Sprintf("%.2f", r.ViewUpdates) }},
	{"crash seen Dead by 99% (s)", func(r result) string { return r.Crash.String() }},
	{"join seen by 99% (s)", func(r result) string { return r.Join.String() }},
	{"leave seen Left by 99% (s)", func(r result) string { return r.Leave.String() }},
	{"leave seen Dead", func(r result) string { return strconv.Itoa(r.LeaveSeenDead) }},
	{"packets lost", func(r result) string { return fmt.Sprintf("%.4f", r.Lost) }},
	{"msgs per evicted parent (gone notice, 4 children)", func(r result) string { return strconv.Itoa(r.NoticeMsgs) }},
	{"msgs per child hint", func(r result) string { return strconv.Itoa(r.ChildHintMsgs) }},
	{"hint + notice msgs per evicted parent", func(r result) string { return strconv.Itoa(r.EvictionMsgs) }},
	{"moved on join", func(r result) string { return fmt.Sprintf("%.4f", r.Moved.Join) }},
	{"joiner's capacity share", func(r result) string { return fmt.Sprintf("%.4f", r.Moved.JoinShare) }},
	{"moved on leave", func(r result) string { return fmt.Sprintf("%.4f", r.Moved.Leave) }},
	{"leaver's capacity share", func(r result) string { return fmt.Sprintf("%.4f", r.Moved.LeaveShare) }},
	{"1/N", func(r result) string { return fmt.Sprintf("%.4f", 1/float64(r.N)) }},
	{"moves as shares", func(r result) string { return map[bool]string{true: "yes", false: "NO"}[r.Moved.OK] }},
	{"coord round (ms)", func(r result) string { return fmt.Sprintf("%.3f", float64(r.CoordRound.Microseconds())/1000) }},
	{"coord round alloc (KiB)", func(r result) string { return fmt.Sprintf("%.1f", float64(r.CoordAlloc)/1024) }},
	{"coord collect: reports/asked", func(r result) string { return fmt.Sprintf("%d/%d", r.CollectGot, r.CollectAsked) }},
	{"coord collect (ms)", func(r result) string { return fmt.Sprintf("%.1f", float64(r.Collect.Microseconds())/1000) }},
	{"dilate", func(r result) string { return strconv.FormatFloat(r.Dilate, 'g', -1, 64) }},
	{"elapsed (s)", func(r result) string { return f0(r.Elapsed.Seconds()) }},
	{"sim CPU (cores)", func(r result) string { return fmt.Sprintf("%.2f", r.Cores) }},
	{"error", func(r result) string { return oneLine(r.Err) }},
}

func f0(x float64) string { return strconv.FormatFloat(x, 'f', 0, 64) }

func writeMarkdown(w io.Writer, rs []result) error {
	row := func(cells []string) string {
		s := "|"
		for _, c := range cells {
			s += " " + c + " |"
		}
		return s + "\n"
	}
	heads, rule := make([]string, len(columns)), make([]string, len(columns))
	for i, c := range columns {
		heads[i], rule[i] = c.head, "---"
	}
	out := row(heads) + row(rule)
	for _, r := range rs {
		out += row(cells(r))
	}
	_, err := io.WriteString(w, out)
	return err
}

func writeCSV(w io.Writer, rs []result) error {
	cw := csv.NewWriter(w)
	heads := make([]string, len(columns))
	for i, c := range columns {
		heads[i] = c.head
	}
	_ = cw.Write(heads)
	for _, r := range rs {
		_ = cw.Write(cells(r))
	}
	cw.Flush()
	return cw.Error()
}

func cells(r result) []string {
	out := make([]string, len(columns))
	for i, c := range columns {
		out[i] = c.cell(r)
	}
	return out
}

// oneLine returns s up to its first line break, at most 300 bytes of it.
func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

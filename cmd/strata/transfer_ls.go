package main

import (
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratakv/strata/client/admin"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

func newTransferLsCmd(g *globals) *cobra.Command {
	var (
		tenant string
		live   bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the transfer rooms, oldest first",
		Long: `List the prefill-decode transfer rooms the cluster holds (those the token
may see): a room's record lives on the node that owns the room's key, and
says where its current attempt is: open (the producer has not published
yet), published (its pages pinned for the consumer), loading (a consumer
took them), draining (aborted while a consumer may still read: pinned
until it acknowledges), or ended: acked, aborted or expired. The records of
ended attempts are kept for a while, so that late calls are answered as
stale; REASON says why an attempt was aborted, DETAIL what the abort said
(for a consumer refused for its namespace, the fields that differ).

Every alive member is asked; in a cluster of more than one member the
NODE column says which node holds each room. AGE is since the attempt
opened; PAGES and BYTES are what the producer published.`,
		Args: cobra.NoArgs,
		RunE: g.onCluster(func(cmd *cobra.Command, c *admin.Cluster, _ []string) error {
			return runTransferLs(cmd, c, g, tenant, live)
		}),
	}
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's rooms")
	cmd.Flags().BoolVar(&live, "live", false, "only rooms whose attempt has not ended")
	return cmd
}

// roomJSON is a RoomInfo and the node that holds it.
type roomJSON struct {
	NodeID           string `json:"node_id"`
	Tenant           string `json:"tenant"`
	Room             string `json:"room"`
	Attempt          uint64 `json:"attempt"`
	State            string `json:"state"`
	Reason           string `json:"reason,omitempty"`
	Detail           string `json:"detail,omitempty"`
	Pages            uint32 `json:"pages"`
	Tokens           uint32 `json:"tokens"`
	Bytes            uint64 `json:"bytes"`
	Mismatches       uint32 `json:"mismatches"`
	OpenedUnixMs     int64  `json:"opened_unix_ms"`
	PublishedUnixMs  int64  `json:"published_unix_ms,omitempty"`
	DoneUnixMs       int64  `json:"done_unix_ms,omitempty"`
	PinExpiresUnixMs int64  `json:"pin_expires_unix_ms,omitempty"`
}

func runTransferLs(cmd *cobra.Command, c *admin.Cluster, g *globals, tenant string, live bool) error {
	rows, failed, err := c.Rooms(cmd.Context(), tenant)
	if err := g.settle(cmd.ErrOrStderr(), failed, err); err != nil {
		return err
	}
	if live {
		rows = slices.DeleteFunc(rows, func(r admin.RoomRow) bool { return ended(r.Info.GetState()) })
	}
	doc := struct {
		NodeID string     `json:"node_id"` // the node asked
		Rooms  []roomJSON `json:"rooms"`
	}{c.NodeID(), []roomJSON{}}
	for _, r := range rows {
		i := r.Info
		doc.Rooms = append(doc.Rooms, roomJSON{NodeID: r.Node, Tenant: i.GetTenant(), Room: i.GetRoom(),
			Attempt: i.GetAttempt(), State: roomState(i.GetState()), Reason: abortReason(i.GetReason()), Detail: i.GetDetail(),
			Pages: i.GetPages(), Tokens: i.GetTokens(), Bytes: i.GetBytes(), Mismatches: i.GetMismatches(),
			OpenedUnixMs: i.GetOpenedUnixMs(), PublishedUnixMs: i.GetPublishedUnixMs(), DoneUnixMs: i.GetDoneUnixMs(),
			PinExpiresUnixMs: i.GetPinExpiresUnixMs()})
	}
	return g.report(cmd, doc, func(w io.Writer) error {
		return writeRooms(w, rows, c.Multi(), time.Now())
	}, nil)
}

// ended reports whether an attempt in state s is over: acked, aborted
// or expired (a draining attempt is not: its consumer may still read).
func ended(s pb.RoomState) bool { return s >= pb.RoomState_ROOM_STATE_ACKED }

// writeRooms prints one row per room; nodes adds the NODE column. DETAIL
// comes last, as it may hold spaces.
func writeRooms(w io.Writer, rows []admin.RoomRow, nodes bool, now time.Time) error {
	tw := newTable(w)
	head := []any{"ROOM", "ATTEMPT", "STATE", "AGE", "PAGES", "BYTES", "TENANT"}
	if nodes {
		head = append(head, "NODE")
	}
	row(tw, append(head, "REASON", "DETAIL")...)
	for _, r := range rows {
		i := r.Info
		cells := []any{i.GetRoom(), i.GetAttempt(), roomState(i.GetState()), ageOf(i.GetOpenedUnixMs(), now),
			i.GetPages(), humanBytes(i.GetBytes()), orNone(i.GetTenant())}
		if nodes {
			cells = append(cells, r.Node)
		}
		row(tw, append(cells, orNone(abortReason(i.GetReason())), orNone(i.GetDetail()))...)
	}
	return tw.Flush()
}

// roomState is "open", "published", "loading", "draining", "acked",
// "aborted" or "expired".
func roomState(s pb.RoomState) string { return enumName(s, "ROOM_STATE_", "unspecified") }

// abortReason is "user_cancel", "timeout", "producer_failure" or
// "consumer_failure"; "" for none.
func abortReason(r pb.AbortReason) string { return enumName(r, "ABORT_REASON_", "") }

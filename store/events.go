package store

import (
	"github.com/stratakv/strata/namespace"
	"github.com/stratakv/strata/tiers"
)

// The store's contents as a stream of changes (Config.OnEvent), for the
// node's KV event stream (package events, node/events.go): every page that
// becomes visible (a commit, a page recovered from a durable tier), every
// page that leaves the index (evicted, deleted, expired, dropped as an
// orphan or as corrupt, handed to its owner), and every namespace dropped
// whole (one EventCleared; none of its pages is reported apart). A page
// moving between tiers is not reported: it stays on the node.
//
// Nothing is kept per page for the stream: what a put carries for it
// (PageSpec.Info: the engine's tokens, LoRA, extra keys) rides the
// reservation until the commit and is handed to OnEvent once. A page
// reported removed, or recovered, is named by its key alone.

// EventKind is what an Event reports.
type EventKind uint8

// Event kinds.
const (
	EventStored  EventKind = iota + 1 // a page became visible
	EventRemoved                      // a page left the index
	EventCleared                      // a namespace was dropped with every page of it
)

// Event is one change of the store's contents.
type Event struct {
	Kind      EventKind
	Namespace namespace.ID
	// Tenant is the namespace's tenant; "" for a namespace known only
	// from recovered pages (its tenant is not known yet).
	Tenant string
	// PageTokens is the namespace's tokens per page (Namespace.PageTokens).
	PageTokens uint32
	// Key, Parent and HasParent name the page (Stored, Removed).
	Key       namespace.Key
	Parent    namespace.Key
	HasParent bool
	// Tier is the tier the page is in (Stored) or left from (Removed).
	Tier tiers.Kind
	// Info is what the page's put carried for the stream; nil for a
	// recovered page, a removal, or a put that carried none.
	Info *PutInfo
}

// PutInfo is what a put carries for the KV event stream alone: the store
// hands it to Config.OnEvent with the page's EventStored and keeps none of
// it.
type PutInfo struct {
	// Tokens are the page's token ids.
	Tokens []uint32
	// LoraName is the LoRA adapter the page was computed with; "" none.
	LoraName string
	// ExtraKeys is the engine's extra keys for the page, one msgpack
	// value (vLLM's BlockStored.extra_keys entry); nil none.
	ExtraKeys []byte
}

// storedLocked reports e, just inserted, to Config.OnEvent.
func (s *Store) storedLocked(e *entry, parent namespace.Key, hasParent bool, info *PutInfo) {
	s.cutChangedLocked(e, false)
	if s.cfg.OnEvent == nil {
		return
	}
	s.cfg.OnEvent(Event{Kind: EventStored, Namespace: e.ns.ID, Tenant: e.ns.Tenant, PageTokens: e.ns.PageTokens,
		Key: e.key, Parent: parent, HasParent: hasParent, Tier: s.cfg.Tiers[e.tier].Kind(), Info: info})
}

// removedLocked reports e, leaving the index, to Config.OnEvent, unless its
// whole namespace is going (DropNamespace reports that once).
func (s *Store) removedLocked(e *entry) {
	if e.ns.dropping {
		return
	}
	s.cutChangedLocked(e, true)
	if s.cfg.OnEvent == nil {
		return
	}
	s.cfg.OnEvent(Event{Kind: EventRemoved, Namespace: e.ns.ID, Tenant: e.ns.Tenant, PageTokens: e.ns.PageTokens,
		Key: e.key, Tier: s.cfg.Tiers[e.tier].Kind()})
}

// clearedLocked reports a namespace dropped whole.
func (s *Store) clearedLocked(n *nsState) {
	cutDroppedLocked(n)
	if s.cfg.OnEvent == nil {
		return
	}
	s.cfg.OnEvent(Event{Kind: EventCleared, Namespace: n.ID, Tenant: n.Tenant, PageTokens: n.PageTokens})
}

// Package eviction decides which pages a strata node drops, and gives the
// cluster what it needs to decide together (DESIGN 5). The same code runs in
// the node's store and in the trace-driven simulator (cmd/strata-sim).
//
// # Value model
//
// Dropping a page costs the recomputation of its tokens the next time a
// prefix that covers it is looked up. Prefill over s tokens of a dense model
// costs
//
//	F(s) = 2·N·s + 2·L·h·d_h·s²
//
// (N parameters, L layers, h attention heads of dimension d_h), so the page
// at depth d (tokens [d·P, d·P+n), P tokens per page, n = P but for a
// partial last page) costs, given its prefix,
//
//	cost(d) = F(d·P+n) − F(d·P) = 2·N·n + 2·L·h·d_h·(2·d·P·n + n²)
//
// (ComputeProfile.PageFLOPs). An engine that measured the cost passes it as
// Page.Cost instead. A page's value is Greedy-Dual-Size-Frequency with that
// cost:
//
//	value = clock + freq · cost / bytes
//
// where freq counts the lookups whose hit prefix covered the page (Hit), so a
// parent is never counted less than its child, and clock is the aging clock
// L: when a page is evicted, L becomes its value, so pages not hit for a
// while fall behind new ones. A page that is put again after an eviction
// starts from the count the frequency history (a TinyLFU-style count-min
// sketch of recent lookups by key, hit or miss: Record) remembers for its
// key, not from 1. KindGDSFBytes, KindLRU and KindLFU are the same machinery
// with other priorities, for comparison.
//
// # Leaf first, orphans first
//
// A lookup answers the run of present pages from the start of the sequence,
// so a page whose parent is gone can never be hit: dropping a parent
// destroys its descendants too. A Queue therefore never offers as victim a
// page with resident children on the same node (ChildAdded(h, true)), and
// the heap holds only the pages that may go now: unpinned and, unless the
// queue is Plain, without resident local children. It orders them by class,
// then value:
//
//	class 0  orphans (SetOrphan: the parent is known to be absent)
//	class 1  pages with no known resident children
//	class 2  pages whose resident children are all on other nodes
//	         (remote hints, ChildAdded(h, false)): dropped only when no
//	         class 0 or 1 page is left
//
// Invariant (DESIGN 9.5): Victim never returns a page that has resident
// local children or is pinned; Evict panics on one. It holds whatever the
// order of calls, because eligibility is recomputed on every state change
// (fix) and the heap is the only source of victims.
//
// # Admission
//
// With a capacity (SetCapacity), Admit refuses a page worth less than the
// page it would displace; a refusal counts as inserting and at once evicting
// it, so the clock still advances (without that, refusals freeze the clock
// and the tier fills with stale pages). A refused put cuts its sequence:
// later pages of the same put could never be hit.
//
// # Global coordination
//
// GDSF values embed each node's clock, which advances at the node's own
// pace, so nodes compare worth instead: freq · cost / bytes (Worth), the
// value clock aside. Summarize condenses a queue into a Summary: bytes per
// worth bucket (64 log-scale buckets, a quarter octave each) plus the
// tier's turnover (bytes evicted or refused per byte of capacity per unit
// of time, which the node smooths), SummarySize (140) bytes encoded so that
// it fits memberlist node metadata. A coordinator merges every node's
// Summary with ComputeCutoffs into
//
//   - Worth: the cutoff below which the cluster holds more bytes than it
//     has room for; nodes may evict below it and refuse puts below it
//     (SetCutoff(c.Floor()));
//   - Pressure: each node's turnover over the cluster's mean. A put whose
//     owner is full and under SpillRatio times its second placement
//     candidate's pressure goes to the candidate (Spill); a put the owner's
//     Admit refuses may go there too. The spilled page carries the owner's
//     history count (Estimate) as Page.Freq.
//
// Placement weighted by capacity equalises pressures on average, so
// coordination mostly idles; it pays when load and capacity part (skewed
// keys, stale weights, a tier slower than its peers). See cmd/strata-sim.
//
// # Cost
//
// Every method is O(1) or O(log n) in the pages tracked and allocation-free
// once the slab has grown; per page a Queue keeps StateBytes (56) of state
// and heap slot, plus 2 to 4 bytes per remembered key of frequency history
// (HistoryBytes; the default remembers 8 keys per page: 16 to 32 bytes). A Queue is not safe for concurrent use: the store calls it
// under the lock that guards its index.
//
// # Store integration
//
// One Queue per tier. Under the store lock:
//   - Lookup: Record(key) for every key asked (hit or miss); Hit(h) for each
//     page of the hit prefix; a present page past the first miss whose parent
//     is absent: SetOrphan(h, true).
//   - Lease or read: Pin(h) while the page must stay, Unpin(h) after.
//   - Reserve: Admit(page) (else answer REJECTED, or spill); while the tier
//     is full: h := Victim(), drop or demote it, Evict(h).
//   - Commit: h := Insert(page); if the parent is resident on this node,
//     ChildAdded(parent, true); children that were waiting for this parent
//     (see below): ChildAdded(h, true) and SetOrphan(child, false).
//   - Delete or demote to another tier: Remove(h) (ChildRemoved on the
//     parent as for an eviction).
//   - Remote hints from other nodes: ChildAdded/ChildRemoved(h, false).
//   - Every few seconds: set Summary.Turnover from Evicted, Summarize, put
//     the encoding in the membership metadata; apply the coordinator's
//     Cutoffs (SetCutoff, Spill on puts).
package eviction

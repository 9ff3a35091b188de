// Package eviction decides which pages a strata node drops, and gives the
// cluster what it needs to decide together (docs/design.md §5). The same code runs in
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
// Page.Cost instead. KindCost values a page at
//
//	value = C · cost / bytes
//
// where C is its reuse count decaying with a half-life: a lookup whose hit
// prefix covers the page (Hit) adds one, so a parent is never counted less
// than its child, and every H page operations of the queue (inserts, hits,
// refusals) halve it. H is chosen online by miniature simulation (see
// Adaptivity), starting from 0.25 tier capacities, in the store and the
// simulator alike; Config.HalfLife fixes it. The queue keeps the value in
// log space, prio = A + log2(C·cost/bytes) with A the half-lives elapsed
// (Σ 1/H over the queue's operations), which moves only when the page is
// used, so comparing priorities compares current values and the heap needs
// no re-sorting as time passes, nor when H changes. A page put again after
// an eviction starts from the count the frequency history (a TinyLFU-style
// count-min sketch of recent lookups by key, hit or miss: Record)
// remembers for its key; a page seen for the first time from the reuse
// learned for pages like it. KindGDSFBytes (Greedy-Dual-Size-Frequency,
// L + freq with the aging clock L), KindLRU and KindLFU are the same
// machinery with other priorities, for comparison.
//
// # Adaptivity
//
// No constant of the policy is tuned to a workload: what depends on one is
// learned online, per queue (a node's tier) and, for the reuse of new
// pages, per namespace (Page.Group), from a ghost list of the keys that
// recently left the queue (evicted, or refused by Admit), as many as the
// tier holds pages (adapt.go). A key that is put again while its ghost
// lives "came back", and says what the queue should have done:
//
//   - Half-life and admission, by miniature simulation (mini.go;
//     Waldspurger et al., USENIX ATC 2017): a spatially hashed sample of
//     the keys (a fixed rate per queue, a power of two, so that about
//     1,024 pages of the tier's capacity are sampled; every key of a
//     smaller tier) is replayed through one shadow queue per Candidate,
//     the same code with the candidate's fixed setting and the sampled
//     capacity: LRU with and without the admission rule below, and
//     half-lives of 0.25, 2 and 8 tier capacities with it. Every epoch the
//     live queue takes the candidate whose shadow saved the most recompute
//     cost lately, by a margin (hysteresis) and by two standard deviations
//     of the difference (confidence); LRU is always a candidate, so the
//     queue is below leaf-first LRU by the sampling error at most. A
//     switch restates every page's priority as if the new half-life had
//     held since the page's last use (O(n), once per switch;
//     Queue.setHalfLife). A cold
//     queue holds the longest half-life, which loses no count, until its
//     first eviction, then 0.25 capacities with the admission rule
//     (measured: eviction/mini.go, startCandidate); the shadows run from
//     its first put.
//   - Reuse of first-timers: a page whose key the frequency history has
//     seen once (the lookup that missed it) is worth the share of pages
//     like it (depth and distance to the end of its put, both in powers of
//     two) that were asked for again before their ghost faded, kept or
//     not; 1 until outcomes are known. Documents read once and the partial
//     last page of every prompt (a longer prompt renames it) learn a share
//     near 0 and rank below pages with a proven reuse; the pages of a
//     conversation that its next turn extends learn a high one.
//   - Depth: the part of a page's cost that grows with depth (cost over
//     the cost of the same tokens at depth 0, Page.FlatCost) counts with a
//     learned weight in [0, 1], from 1: a deep page coming back raises it,
//     a shallow one lowers it (again weighted by the ghosts' populations),
//     so where reuse falls with depth the cost term stops favouring deep
//     pages.
//   - Admission: see below.
//
// Config.Static turns all of it off (the policy as it was, for
// comparison). In cmd/strata-sim (4 equal nodes, one placement; sizes are
// shares of a trace's distinct KV bytes; strata-sim --trace T --policies
// lru,ours-node,belady --half-lives 0.25,2,8, or TestAcceptanceChoice with
// -sim.placements=1, at the commit that restated switches: git log
// eviction/mini.go), ours-node saves, in points of prefill FLOPs over LRU
// at 5, 10, 25 and 50%: on the synthetic trace +4.21, +5.24, +2.65, +2.92
// (the best fixed half-life +4.36, +6.21, +2.96, +3.33); on gen:recency
// +4.31, +4.73, +3.22, +0.01 (best fixed +4.77, +5.35, +3.22, +0.01); on
// gen:scan +0.37, +6.38, +21.80, +0.01 (best fixed +0.17, +6.36, +22.38,
// 0.00). It is within a point of the best fixed candidate everywhere
// (0.97 short on the synthetic trace at 10%, where the shadows prefer 8
// capacities and the live queue would do better with 2) and never below
// LRU. At 5% on the synthetic trace it saves 50% of Belady's bound (18.47
// of 37.01%), as the best fixed half-life does (8 capacities, 18.62%).
// Belady's lead there is knowing which pages come back soon: LRU told by
// an oracle to store only pages used again within 200 requests saves
// 24.59%, but nothing a cache sees separates them (92% of first-time
// pages and 78% of pages used once before do not come back that soon),
// and no policy measured that does not know the future came more than
// 0.4 points nearer: admission candidates (every first-timer against the
// victim, its put's chain counted; none on first sighting) were never
// taken by the shadows, which replay single pages, not chains, and fixed
// in the live queue the first saved 18.85% there but lost 1.7 points at
// 10% on capacities 1:1:2:4, the second lost 0.8 (cmd/strata-sim,
// choiceShort).
//
// # What a page saves: its subtree
//
// A page's own value is not what dropping it loses. A lookup stops at the
// first missing page, so dropping a page loses every descendant too: keeping
// it saves the whole hit prefix it lets through. KindCost therefore orders a
// page by the larger of its own value and its best resident descendant's,
// and Worth reports that. A node knows its own pages; for descendants on
// other nodes each owner passes a page's Worth to its parent's owner when it
// changes (value hints, batched like the child hints of ChildAdded), and
// SetChildWorth applies the best child's. Since the recompute cost grows
// with depth, a chain is then valued by how long a prefix it saves.
//
// Without value hints, pages of one chain spread over several nodes are
// ordered on each node by their own value alone: the cheap shallow pages of
// valuable chains go first and cut them. In cmd/strata-sim, which runs the
// store (figures of the policy before it adapted, commit ee60cac, with a
// fixed half-life of three capacities), on the synthetic trace (4 equal nodes, averaged over 5
// placements) the policy without value hints between nodes (ours-noworth)
// saves 17.0% more prefill FLOPs than per-node LRU at 5% capacity, with
// them (ours-node) 23.7% more, and with them but without the depth term
// (ours-costblind, every page priced as at depth 0) 19.5% more.
//
// # Leaf first, orphans first
//
// A page whose parent is gone can never be hit. A Queue therefore never
// offers as victim a page with resident children on the same node
// (ChildAdded(h, true)), and the heap holds only the pages that may go now:
// unpinned and, unless the queue is Plain, without resident local children.
// It orders them by class, then value:
//
//	class 0  orphans (SetOrphan: an ancestor is known to be absent)
//	class 1  pages with no known resident children
//	class 2  pages whose resident children are all on other nodes
//	         (remote hints, ChildAdded(h, false)): dropped only when no
//	         class 0 or 1 page is left
//
// A page is an orphan while any ancestor is absent, not only its parent:
// when a page goes, the owners of its resident children learn it (the
// store's parent-gone notices) and drop them, deepest first, unless they
// are pinned or were put too recently to be sure (those are marked and go
// first); dropping them tells their own children's owners in turn, so a
// dead subtree is reclaimed at once wherever it lives. Orphans that no
// notice reached (a lost notice, a page put after its parent went) are
// found by cluster lookups that stop before them, and only marked: a
// lookup's miss may be a node that is down for a while. In cmd/strata-sim
// (before the policy adapted, commit ee60cac)
// on the synthetic trace at 5% capacity (4 equal nodes, 5 placements),
// dropping on notice keeps orphaned bytes under 0.05% of capacity and
// saves 17.94% of prefill FLOPs; with orphans found by lookups only and
// marked (ours-nonotice) they average 1.09% of capacity, peak at 4.42%,
// and 16.82% is saved.
//
// Invariant (docs/design.md §10.5): Victim never returns a page that has resident
// local children or is pinned; Evict panics on one. It holds whatever the
// order of calls, because eligibility is recomputed on every state change
// (fix) and the heap is the only source of victims.
//
// # Admission
//
// Admit refuses a page worth less than the cutoff (SetCutoff). With a
// capacity (SetCapacity) the other kinds also refuse a page worth less than
// the page it would displace (an orphan victim never keeps a page out).
// An adaptive KindCost queue whose chosen Candidate has Admit does so only
// for a first-timer that ends its
// put (Page.ChainDepth not past its depth) and whose learned share of
// reuse is below the share of evicted pages that came back (what an
// eviction has been costing): a put is a sequence, and refusing a page
// with descendants in it cuts them, whose worth it does not hold yet (an
// earlier version of this change that compared every page left orphaned
// bytes peaking at 2.7% of capacity at 5% on the synthetic trace, one
// placement, against 0.05% now). A static one does so only with
// Config.CapacityAdmission. A refusal counts as inserting and at once
// evicting the page, so the clock still advances, and leaves a ghost. A
// refused put cuts its sequence: later pages of the same put could never
// be hit.
//
// # Global coordination
//
// Values embed each node's clock, which advances at the node's own pace, so
// nodes compare worth instead (Worth: the value clock aside; for KindCost
// the decayed reuse count × cost / bytes of the page or its best resident
// descendant). Summarize condenses a queue into a Summary: bytes per worth
// bucket (64 log-scale buckets, a quarter octave each) plus the tier's
// turnover (bytes evicted or refused per byte of capacity per unit of time,
// which the node smooths), SummarySize (140) bytes encoded so that it fits
// memberlist node metadata. A coordinator merges every node's Summary with
// ComputeCutoffs into
//
//   - Worth: the cutoff below which the cluster holds more bytes than it
//     has room for; nodes may evict below it and refuse puts worth less
//     than Config.AdmitShare of it (SetCutoff(c.Floor()));
//   - Pressure: each node's turnover over the cluster's mean. Spill says
//     whether a put whose owner is full and under SpillRatio times its
//     second placement candidate's pressure should go to the candidate,
//     carrying the owner's history count (Estimate) as Page.Freq; no node
//     or client acts on it yet: a put goes to the second candidate only
//     when its owner's Admit refuses it.
//
// Placement weighted by capacity equalises pressures on average, so
// coordination mostly idles. In cmd/strata-sim, which runs the store, the
// floor alone does not pay even where load and capacity part (capacities
// 1:1:2:4 with equal placement weights: the global and per-node variants
// tie at every size); an earlier copy of the policy in the simulator that
// spilled by pressure saved 15.2% of prefill FLOPs there at 5% capacity
// against 12.7% per node.
//
// # Cost
//
// Every method is O(1) or O(log n) in the pages tracked, times the
// candidates for a sampled key (but the rare call that switches the
// chosen half-life, O(n): it restates every page and rebuilds the heap),
// and allocation-free once the slab has
// grown (the ghost list and its index are sized once; the sample's map of
// keys reuses its room);
// per page a Queue keeps StateBytes (56) of state and heap slot,
// IdentBytes (16) more when its caller does not answer the pages' Key,
// Group and Bytes (Config.Ident: the store does), plus 2 to 4 bytes per
// remembered key of frequency history (HistoryBytes; the default
// remembers 8 keys per page: 16 to 32 bytes), plus about 21 bytes of ghost
// per page of capacity when adaptive (a 16-byte ring slot and 5.3 bytes of
// index), plus the miniature simulations' sample (SampleBytes: one
// shadow queue per candidate over about 1,024 sampled pages, 0.66 bytes a
// page of a tier of a million pages, sample-B in the store's
// BenchmarkIndexBytesPerPage; a tier of up to 1,024 pages samples every
// key, and keeps five shadow queues of its own size). A Queue is not safe
// for concurrent use: the store calls it under the lock that guards its
// index.
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
//   - Drop a page (evict from the last tier, delete) that has remote
//     children: send a parent-gone notice to the other nodes, which drop
//     the resident children listed under its key, deepest first, or
//     SetOrphan(child, true) those pinned or just put (store.ParentsGone);
//     a cluster lookup that finds pages past a miss has the client tell
//     their nodes the same way (store.MarkOrphans).
//   - Delete or demote to another tier: Remove(h) (ChildRemoved on the
//     parent as for an eviction).
//   - Remote hints from other nodes: ChildAdded/ChildRemoved(h, false);
//     value hints: SetChildWorth(h, best Worth among h's resident children).
//     Send a page's Worth to its parent's owner after lookups that hit it
//     and after its children change.
//   - Every few seconds: set Summary.Turnover from Evicted, Summarize, put
//     the encoding in the membership metadata; apply the coordinator's
//     Cutoffs (SetCutoff).
package eviction

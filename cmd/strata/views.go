package main

import (
	"maps"
	"time"

	"github.com/stratakv/strata/client/admin"
	pb "github.com/stratakv/strata/proto/strata/v1"
)

// The -o json documents. Field names are the proto's snake_case names and
// stay stable; bytes are lowercase hex, enums lowercase words ("host",
// "crc32c"), times Unix milliseconds.

// namespaceJSON is a NamespaceInfo, summed over the nodes that report it.
type namespaceJSON struct {
	ID            string         `json:"id"`
	Descriptor    descriptorJSON `json:"descriptor"`
	PageBytes     uint64         `json:"page_bytes"`
	Pages         uint64         `json:"pages"`
	Bytes         uint64         `json:"bytes"`
	CreatedUnixMs int64          `json:"created_unix_ms"`
	Lookups       uint64         `json:"lookups"`
	LookupKeys    uint64         `json:"lookup_keys"`
	HitKeys       uint64         `json:"hit_keys"`
	HitRate       *float64       `json:"hit_rate"` // percent; null before any lookup
	LeasesActive  uint64         `json:"leases_active"`
	TTLMs         uint64         `json:"ttl_ms"` // idle TTL of pages, the longest of any node; 0 = none
	ExpiredPages  uint64         `json:"expired_pages"`
	Tiers         []tierJSON     `json:"tiers"`
	Nodes         []string       `json:"nodes"` // IDs of the nodes holding pages of it
}

// nsNodeJSON is one node's share of a namespace.
type nsNodeJSON struct {
	NodeID string `json:"node_id"`
	usageJSON
	LeasesActive uint64     `json:"leases_active"`
	TTLMs        uint64     `json:"ttl_ms"`
	ExpiredPages uint64     `json:"expired_pages"`
	Tiers        []tierJSON `json:"tiers"`
}

// usageJSON is what a namespace, or part of one, holds and how it was
// looked up.
type usageJSON struct {
	Pages      uint64   `json:"pages"`
	Bytes      uint64   `json:"bytes"`
	Lookups    uint64   `json:"lookups"`
	LookupKeys uint64   `json:"lookup_keys"`
	HitKeys    uint64   `json:"hit_keys"`
	HitRate    *float64 `json:"hit_rate"` // percent; null before any lookup
}

func usageView(n *pb.NamespaceInfo) usageJSON {
	return usageJSON{Pages: n.GetPages(), Bytes: n.GetBytes(), Lookups: n.GetLookups(), LookupKeys: n.GetLookupKeys(),
		HitKeys: n.GetHitKeys(), HitRate: hitRateJSON(n)}
}

// descriptorJSON is a Descriptor.
type descriptorJSON struct {
	identityJSON
	Engine          string            `json:"engine"`
	KVFormatVersion uint32            `json:"kv_format_version"`
	DType           string            `json:"dtype"`
	KVDType         string            `json:"kv_dtype"`
	Layout          string            `json:"layout"`
	PageTokens      uint32            `json:"page_tokens"`
	NumLayers       uint32            `json:"num_layers"`
	NumKVHeads      uint32            `json:"num_kv_heads"`
	HeadDim         uint32            `json:"head_dim"`
	MLALatentDim    uint32            `json:"mla_latent_dim"`
	TPSize          uint32            `json:"tp_size"`
	TPRank          uint32            `json:"tp_rank"`
	PPSize          uint32            `json:"pp_size"`
	PPRank          uint32            `json:"pp_rank"`
	CPSize          uint32            `json:"cp_size"`
	CPRank          uint32            `json:"cp_rank"`
	Quantization    string            `json:"quantization"`
	Extra           map[string]string `json:"extra"`
	PageBytes       uint64            `json:"page_bytes"`  // declared; 0 = derived from the geometry
	PageFormat      string            `json:"page_format"` // "" = not stated
	Checksum        string            `json:"checksum"`
	KeyFormat       string            `json:"key_format"`
	Compute         computeJSON       `json:"compute"`
}

// identityJSON is the fields of a descriptor that name a model, as in
// namespace.Descriptor.ForkKey: namespaces that differ in one of them are
// different models, never forks.
type identityJSON struct {
	Tenant            string `json:"tenant"`
	Model             string `json:"model"`
	ModelRevision     string `json:"model_revision"`
	Adapter           string `json:"adapter"`
	AdapterRevision   string `json:"adapter_revision"`
	TokenizerRevision string `json:"tokenizer_revision"`
}

// computeJSON is a ComputeProfile.
type computeJSON struct {
	Params           uint64 `json:"params"`
	AttentionHeads   uint32 `json:"attention_heads"`
	AttentionHeadDim uint32 `json:"attention_head_dim"`
}

// tierJSON is a TierStats.
type tierJSON struct {
	Tier          string `json:"tier"`
	CapacityBytes uint64 `json:"capacity_bytes"`
	UsedBytes     uint64 `json:"used_bytes"`
	Pages         uint64 `json:"pages"`
	Fault         string `json:"fault,omitempty"` // "ok", "disk-full", "read-only", "io-error"; absent from older nodes
	// SlotBytes is the part of UsedBytes that shm slots granted ahead of
	// puts hold (a node's tiers only; absent when none).
	SlotBytes uint64 `json:"slot_bytes,omitempty"`
}

// keyJSON is a KeyInfo.
type keyJSON struct {
	Node             string `json:"node"` // the node that holds this copy
	Key              string `json:"key"`
	ParentKey        string `json:"parent_key"` // "" for the first page of a sequence
	Depth            uint32 `json:"depth"`
	Size             uint64 `json:"size"`
	Checksum         string `json:"checksum"`
	Tier             string `json:"tier"`
	CreatedUnixMs    int64  `json:"created_unix_ms"`
	LastAccessUnixMs int64  `json:"last_access_unix_ms"`
	Leases           uint32 `json:"leases"`
	Hits             uint64 `json:"hits"`
	ResidentChildren uint32 `json:"resident_children"`
	Orphan           bool   `json:"orphan"` // an ancestor is known absent: evicted first
}

func namespaceView(t *admin.Namespace) namespaceJSON {
	n := t.Info
	return namespaceJSON{
		ID: hexOf(n.GetId()), Descriptor: descriptorView(n.GetDescriptor_()),
		PageBytes: n.GetPageBytes(), Pages: n.GetPages(), Bytes: n.GetBytes(),
		CreatedUnixMs: n.GetCreatedUnixMs(), Lookups: n.GetLookups(), LookupKeys: n.GetLookupKeys(),
		HitKeys: n.GetHitKeys(), HitRate: hitRateJSON(n), LeasesActive: n.GetLeasesActive(),
		TTLMs: n.GetTtlMs(), ExpiredPages: n.GetExpiredPages(), Tiers: tiersView(n.GetTiers()), Nodes: t.Holders(),
	}
}

func nsNodeView(p admin.NodeNamespace) nsNodeJSON {
	n := p.Info
	return nsNodeJSON{NodeID: p.Node, usageJSON: usageView(n), LeasesActive: n.GetLeasesActive(), TTLMs: n.GetTtlMs(), ExpiredPages: n.GetExpiredPages(),
		Tiers: tiersView(n.GetTiers())}
}

// hitRateJSON is the hit rate in percent, or nil before any lookup.
func hitRateJSON(n *pb.NamespaceInfo) *float64 {
	if pct, ok := hitRate(n); ok {
		return &pct
	}
	return nil
}

func tiersView(ts []*pb.TierStats) []tierJSON {
	out := []tierJSON{}
	for _, t := range ts {
		out = append(out, tierView(t))
	}
	return out
}

func tierView(t *pb.TierStats) tierJSON {
	return tierJSON{Tier: tierName(t.GetTier()), CapacityBytes: t.GetCapacityBytes(), UsedBytes: t.GetUsedBytes(),
		Pages: t.GetPages(), Fault: t.GetFault(), SlotBytes: t.GetSlotBytes()}
}

func descriptorView(d *pb.Descriptor) descriptorJSON {
	extra := maps.Clone(d.GetExtra())
	if extra == nil {
		extra = map[string]string{}
	}
	c := d.GetCompute()
	return descriptorJSON{
		identityJSON: identityJSON{Tenant: d.GetTenant(), Model: d.GetModel(), ModelRevision: d.GetModelRevision(),
			Adapter: d.GetAdapter(), AdapterRevision: d.GetAdapterRevision(), TokenizerRevision: d.GetTokenizerRevision()},
		Engine:          d.GetEngine(),
		KVFormatVersion: d.GetKvFormatVersion(), DType: d.GetDtype(), KVDType: d.GetKvDtype(),
		Layout: d.GetLayout(), PageTokens: d.GetPageTokens(), NumLayers: d.GetNumLayers(),
		NumKVHeads: d.GetNumKvHeads(), HeadDim: d.GetHeadDim(), MLALatentDim: d.GetMlaLatentDim(),
		TPSize: d.GetTpSize(), TPRank: d.GetTpRank(), PPSize: d.GetPpSize(), PPRank: d.GetPpRank(),
		CPSize: d.GetCpSize(), CPRank: d.GetCpRank(), Quantization: d.GetQuantization(), Extra: extra,
		PageBytes: d.GetPageBytes(), PageFormat: d.GetPageFormat(), Checksum: checksumName(d.GetChecksum()),
		KeyFormat: keyFormatName(d.GetKeyFormat()),
		Compute: computeJSON{Params: c.GetParams(), AttentionHeads: c.GetAttentionHeads(),
			AttentionHeadDim: c.GetAttentionHeadDim()},
	}
}

func keyView(r admin.KeyRow) keyJSON {
	node, k := r.Node, r.Info
	return keyJSON{
		Node: node, Key: hexOf(k.GetKey()), ParentKey: hexOf(k.GetParentKey()), Depth: k.GetDepth(), Size: k.GetSize(),
		Checksum: hexOf(k.GetChecksum()), Tier: tierName(k.GetTier()), CreatedUnixMs: k.GetCreatedUnixMs(),
		LastAccessUnixMs: k.GetLastAccessUnixMs(), Leases: k.GetLeases(), Hits: k.GetHits(),
		ResidentChildren: k.GetResidentChildren(), Orphan: k.GetOrphan(),
	}
}

// nodeJSON is a member of the view and, when it answered, its NodeInfo.
type nodeJSON struct {
	NodeID        string        `json:"node_id"`
	State         string        `json:"state"` // alive, suspect, dead or left
	GRPCAddress   string        `json:"grpc_address"`
	GossipAddress string        `json:"gossip_address"`
	Weight        float64       `json:"weight"`
	Error         string        `json:"error"` // why an alive or suspect member gave no info; "" otherwise
	Info          *nodeInfoJSON `json:"info"`  // null when not asked (dead, left) or when it failed
}

// nodeInfoJSON is a NodeInfoResponse.
type nodeInfoJSON struct {
	NodeID        string         `json:"node_id"`
	GRPCAddress   string         `json:"grpc_address"`
	GossipAddress string         `json:"gossip_address"`
	Version       string         `json:"version"`
	StartedUnixMs int64          `json:"started_unix_ms"`
	Pages         uint64         `json:"pages"`
	Reservations  uint64         `json:"reservations"` // for known pages, slots not included
	Slots         uint64         `json:"slots"`        // shm slots granted ahead of puts
	SlotBytes     uint64         `json:"slot_bytes"`
	LeasesActive  uint64         `json:"leases_active"`
	Evictions     uint64         `json:"evictions"`
	Demotions     uint64         `json:"demotions"`
	CorruptPages  uint64         `json:"corrupt_pages"`
	Tiers         []tierJSON     `json:"tiers"`
	Recovery      []recoveryJSON `json:"recovery"`
	EtcdEndpoints []string       `json:"etcd_endpoints"`
	EtcdHealthy   bool           `json:"etcd_healthy"`
	EtcdError     string         `json:"etcd_error"`
	// EventStreams is the node's KV event streams the caller may see.
	EventStreams []eventStreamJSON `json:"event_streams"`
}

// eventStreamJSON is an EventStreamInfo: one tenant's KV event stream on a
// node (docs/design.md §15).
type eventStreamJSON struct {
	Tenant          string `json:"tenant"`
	PubAddress      string `json:"pub_address"`
	ReplayAddress   string `json:"replay_address"`
	Incarnation     uint64 `json:"incarnation"`
	NextSeq         uint64 `json:"next_seq"`
	Events          uint64 `json:"events"`
	Batches         uint64 `json:"batches"`
	ReplayRequests  uint64 `json:"replay_requests"`
	Overruns        uint64 `json:"overruns"`
	Resyncs         uint64 `json:"resyncs"`
	SubscriberDrops uint64 `json:"subscriber_drops"`
	Subscribers     uint32 `json:"subscribers"`
	LastEventUnixMs int64  `json:"last_event_unix_ms"` // 0: none sent yet
}

func eventStreamsView(es []*pb.EventStreamInfo) []eventStreamJSON {
	out := []eventStreamJSON{}
	for _, e := range es {
		out = append(out, eventStreamJSON{Tenant: e.GetTenant(), PubAddress: e.GetPubAddress(),
			ReplayAddress: e.GetReplayAddress(), Incarnation: e.GetIncarnation(), NextSeq: e.GetNextSeq(),
			Events: e.GetEvents(), Batches: e.GetBatches(), ReplayRequests: e.GetReplayRequests(),
			Overruns: e.GetOverruns(), Resyncs: e.GetResyncs(), SubscriberDrops: e.GetSubscriberDrops(),
			Subscribers: e.GetSubscribers(), LastEventUnixMs: e.GetLastEventUnixMs()})
	}
	return out
}

// recoveryJSON is a TierRecovery.
type recoveryJSON struct {
	Tier      string `json:"tier"`
	Recovered uint64 `json:"recovered"`
	Dropped   uint64 `json:"dropped"`
	Torn      uint64 `json:"torn"`
	Bytes     uint64 `json:"bytes"`
}

func nodeView(r nodeReport) nodeJSON {
	v := nodeJSON{NodeID: r.GetNodeId(), State: stateName(r.GetState()), GRPCAddress: r.GetGrpcAddress(),
		GossipAddress: r.GetGossipAddress(), Weight: r.GetWeight()}
	if r.err != nil {
		v.Error = brief(r.err)
	}
	if i := r.Info; i != nil {
		v.Info = &nodeInfoJSON{NodeID: i.GetNodeId(), GRPCAddress: i.GetGrpcAddress(),
			GossipAddress: i.GetGossipAddress(), Version: i.GetVersion(), StartedUnixMs: i.GetStartedUnixMs(),
			Pages: i.GetPages(), Reservations: i.GetReservations(), Slots: i.GetSlots(), SlotBytes: i.GetSlotBytes(),
			LeasesActive: i.GetLeasesActive(), Evictions: i.GetEvictions(), Demotions: i.GetDemotions(),
			CorruptPages: i.GetCorruptPages(), Tiers: tiersView(i.GetTiers()), Recovery: recoveryView(i.GetRecovery()),
			EtcdEndpoints: append([]string{}, i.GetEtcdEndpoints()...), EtcdHealthy: i.GetEtcdHealthy(),
			EtcdError: i.GetEtcdError(), EventStreams: eventStreamsView(i.GetEventStreams())}
	}
	return v
}

func recoveryView(rs []*pb.TierRecovery) []recoveryJSON {
	out := []recoveryJSON{}
	for _, r := range rs {
		out = append(out, recoveryJSON{Tier: tierName(r.GetTier()), Recovered: r.GetRecovered(),
			Dropped: r.GetDropped(), Torn: r.GetTorn(), Bytes: r.GetBytes()})
	}
	return out
}

// clusterJSON is `cluster status`.
type clusterJSON struct {
	NodeID      string             `json:"node_id"`     // the node asked
	Coordinator string             `json:"coordinator"` // "" when the node asked uses local cutoffs
	Cutoffs     *cutoffsJSON       `json:"cutoffs"`     // what the node asked applies; null when it did not say
	Members     memberCountsJSON   `json:"members"`
	Etcd        *etcdJSON          `json:"etcd"`  // as the node asked sees it; null when it gave no info
	Tiers       []clusterTierJSON  `json:"tiers"` // summed over the nodes that answered
	Nodes       []nodeJSON         `json:"nodes"`
	Recovery    []nodeRecoveryJSON `json:"recovery"` // every node's start-up recovery, per durable tier
	// Events is every node's KV event streams the caller may see.
	Events []nodeEventStreamJSON `json:"event_streams"`
	now    time.Time             // when the figures were read
}

// nodeEventStreamJSON is one tenant's KV event stream on a node.
type nodeEventStreamJSON struct {
	NodeID string `json:"node_id"`
	eventStreamJSON
}

// cutoffsJSON is the eviction cutoffs a node applies (docs/design.md §5.4).
type cutoffsJSON struct {
	Coordinated bool             `json:"coordinated"` // false: the node's own (local) cutoffs
	Epoch       uint64           `json:"epoch"`       // the coordinator's election epoch; 0 when local
	Round       uint64           `json:"round"`       // the publication within the epoch
	Tiers       []tierCutoffJSON `json:"tiers"`
}

type tierCutoffJSON struct {
	Tier  string  `json:"tier"`
	Worth float64 `json:"worth"` // the floor in worth units; 0: none
}

func cutoffsView(cs *pb.CutoffState) *cutoffsJSON {
	if cs == nil {
		return nil
	}
	out := &cutoffsJSON{Coordinated: cs.GetCoordinated(), Epoch: cs.GetEpoch(), Round: cs.GetRound(), Tiers: []tierCutoffJSON{}}
	for _, t := range cs.GetTiers() {
		out.Tiers = append(out.Tiers, tierCutoffJSON{Tier: tierName(t.GetTier()), Worth: t.GetWorth()})
	}
	return out
}

// memberCountsJSON counts the members of the view by state, and those
// that answered NodeInfo.
type memberCountsJSON struct {
	Total    int `json:"total"`
	Alive    int `json:"alive"`
	Suspect  int `json:"suspect"`
	Dead     int `json:"dead"`
	Left     int `json:"left"`
	Answered int `json:"answered"`
}

// etcdJSON is the etcd part of a NodeInfoResponse.
type etcdJSON struct {
	Endpoints []string `json:"endpoints"`
	Healthy   bool     `json:"healthy"`
	Error     string   `json:"error"`
}

// clusterTierJSON is one tier summed over nodes.
type clusterTierJSON struct {
	kind pb.Tier
	tierJSON
	Nodes int `json:"nodes"` // how many nodes have the tier
}

// nodeRecoveryJSON is one node's recovery of one tier.
type nodeRecoveryJSON struct {
	NodeID string `json:"node_id"`
	recoveryJSON
}

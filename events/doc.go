// Package events publishes a node's KV event stream in vLLM's wire format,
// so that cache-aware routers (llm-d's kv-cache indexer, Dynamo's KV
// router, the Mooncake Conductor) see what strata holds as they see an
// engine's own cache (issue 43; docs/design.md §15).
//
// # Wire format
//
// As vllm/distributed/kv_events.py of the pinned wheel defines it: a ZMQ
// PUB socket sends each batch as three frames, [topic, sequence number as
// 8 big-endian bytes, msgpack KVEventBatch]; a ROUTER socket answers a
// request carrying a start sequence number (8 big-endian bytes) with every
// batch its ring still holds from there on, then the end marker [“”, -1,
// “”]. A KVEventBatch is msgspec's array form, [ts, events]; each event is
// the map form the wheel's classes encode (tagged "type": "BlockStored",
// "BlockRemoved", "AllBlocksCleared"; fields without a default always
// present). DecodeBatch also reads the array form older vLLM and SGLang
// send.
//
// The topic is "kv@<node>.<incarnation>@<namespace ID>". Sequence numbers
// are the stream's (one per tenant, across its namespaces' topics): a
// consumer that subscribes to one namespace sees the others' numbers as
// gaps.
//
// # What an event says
//
// Each event names one block, a strata page: block_hashes is the page's
// strata key (32 bytes), parent_block_hash its parent's. The key is the
// one name the node still has when it evicts the page: nothing of the
// engine's (its own hash, the tokens) is stored per page, so BlockRemoved
// names the page by the key its BlockStored announced, and a router
// matches them as it matches an engine's own hashes. A router that also
// reads an engine's stream joins the two by namespace.KeyFromEngineHash:
// the key is SHA-256 of a domain, the namespace ID (in the topic) and the
// engine's hash. BlockStored carries what the put carried for it alone
// (store.PutInfo): token_ids, lora_name, the engine's extra_keys entry;
// block_size is the namespace's tokens per page. medium is always
// "STORAGE" (MediumStorage) and ownership names the tier,
// "strata/<tier>", where vLLM puts a secondary offloading tier: a page
// moving between strata's tiers stays on the node and sends nothing. A
// namespace dropped sends one AllBlocksCleared under its topic.
//
// # Delivery
//
// Publish never blocks: events wait in a bounded queue, and one past it is
// dropped and counted (Stats.Overruns). A dropped event has no sequence
// number, so no consumer could see the loss: the publisher instead
// resynchronises the namespace once the queue has drained, with an
// AllBlocksCleared and then the namespace's current blocks (Config.Resync,
// which has no tokens to send). Every event queued before the drop was
// sent by then, and each block's newest change comes last, so a consumer
// that applies the stream in order ends with the node's contents. A slow
// subscriber misses batches at its own queue's bound, as with libzmq's
// high-water mark, and asks the replay socket for them.
//
// Publish wakes nobody while events flow: the publisher sends the first
// event after a quiet spell at once, then lingers (Config.Linger, 10 ms)
// and sends what came meanwhile as one batch, earlier when a batch's
// worth is queued. A batch's cost is mostly wakes on both sides, not its
// bytes, so this is what keeps a node's puts as fast with the stream on.
// The replay ring keeps the last Config.Buffer batches within
// Config.BufferBytes.
//
// # Tenants
//
// A publisher serves one stream; the node runs one per tenant that opts
// in, each on its own sockets, and both sockets require ZMTP PLAIN
// credentials (Config.Auth: the node accepts the tenant's name and its
// token, nothing else). A subscriber of another tenant fails the
// handshake, so no stream carries another tenant's keys.
//
// # Libraries
//
// github.com/go-zeromq/zmq4 (pure Go: the node builds with CGO_ENABLED=0,
// as deploy/docker does, which libzmq bindings would break) frames the
// messages and runs the ZMTP handshakes; it interoperates with pyzmq 27
// (libzmq 4.3.5), python/tests/test_events.py shows it. Its sockets are
// not used on the publishing side: they handshake inside their accept
// loop (one silent peer stalls every later one), write to subscribers in
// turn without deadlines (one slow peer stalls all), check no PLAIN
// credentials, and allocate whatever length a peer declares. The
// publisher keeps its connections itself (conns.go) over zmq4.Open, with
// a PLAIN server that checks credentials and a guard on the read side
// (wire.go). github.com/vmihailenco/msgpack/v5 encodes and decodes.
package events

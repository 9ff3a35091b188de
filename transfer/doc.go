// Package transfer holds the rooms through which a prefill engine hands
// the KV of a request to a decode engine by way of the store, with the
// fencing rules of prefill–decode disaggregation (docs/design.md,
// "Transfer").
//
// A room is the routing label both engines know (vLLM's request id,
// SGLang's bootstrap room), scoped to a tenant. An attempt is a number the
// rooms assign when a producer opens a room: attempts increase, across
// rooms and across restarts of the node (they start from the clock), and
// are never reused. Every call after Open names its attempt, and a call
// naming any attempt but a room's current one changes nothing.
//
// The life of an attempt:
//
//	Open ──Publish──▶ Published ──Await──▶ Loading ──Ack──▶ Acked
//	  │                   │                   │
//	  │                   └──Abort──▶ Aborted └──Abort──▶ Draining ──Ack/pin TTL──▶ Aborted
//	  └──Abort──▶ Aborted, or Expired when the producer never publishes
//
// The producer has committed its pages by ordinary puts before it
// publishes; Publish names them (namespace, keys in order, token count)
// and pins them through the Pinner for the consumer: the pin has its own
// TTL, a cap on pinned bytes for the node and a quota per tenant, apart
// from read leases. A page not committed fails the publish and pins
// nothing: a consumer sees all of an attempt's pages or none.
//
// The invariants, each with a test (rooms_test.go):
//
//   - One live attempt per room. Open on a room whose attempt is not
//     terminal is refused (ErrRoomBusy); a room is reusable once its
//     attempt is acknowledged, aborted and drained, or expired.
//   - Abort before publication makes a later Publish non-publishing
//     (ErrAborted, nothing stays pinned); Publish before Abort needs the
//     ordinary release: the pin is held until the consumer, if it took the
//     pages, acknowledges that it stopped reading (Ack), or the pin TTL.
//     Cancellation is a control decision, not a memory fence.
//   - A call naming an old attempt (late or duplicate Publish, duplicate
//     Abort, late Ack) does not change its successor (ErrStaleAttempt).
//   - A consumer whose namespace differs from the producer's is refused
//     with the differing descriptor fields (ErrMismatch), never given the
//     pages; the refusal aborts the attempt, is counted, and the producer
//     sees it in the room's Status.
//   - Terminal records (tombstones) are kept for a bounded time and count,
//     and counted.
//   - The consumer's destination memory is written only by its own
//     process: the rooms hand out keys, never addresses, and the consumer
//     pulls the bytes with ordinary gets into memory it owns. A cancelled
//     load leaves nothing else writing there.
package transfer

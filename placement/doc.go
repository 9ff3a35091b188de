// Package placement decides which nodes hold a page: capacity-weighted
// rendezvous (highest-random-weight, HRW) hashing of 32-byte page keys over
// the live nodes of a membership View (docs/design.md §6.4). The top-ranked node is the
// page's owner, the second is its spill candidate, and the top n are its
// replicas. Servers and clients compute the same answer from the same View
// without talking to each other; a Python client reimplements the scoring,
// so it is specified here bit for bit.
//
// # Algorithm
//
// For a key K and node i with weight w_i > 0, every node gets a score
//
//	score_i = w_i / -ln(u_i)
//
// where u_i in (0,1) is a hash of (K, node i) treated as a uniform variate.
// The key's candidates are the nodes in decreasing score order; the owner is
// the first. This is the "logarithmic method" for weighted rendezvous hashing
// (Schindelhauer and Schomaker, "Weighted Distributed Hash Tables", 2005;
// J. Resch, "New Hashing Algorithms for Data Storage"). It is the exponential
// race: -ln(u_i) is Exp(1), so E_i = -ln(u_i)/w_i = 1/score_i is an
// exponential clock with rate w_i, and the first clock to fire (the highest
// score) belongs to node i with probability exactly w_i / Σw. Because the
// exponential is memoryless, the runner-up is distributed in proportion to the
// weights of the remaining nodes, and so on down the ranking: the spill
// candidate and replicas are weighted by capacity too.
//
// # Why membership changes move few keys
//
// A node's score for a key depends only on that key and that node, never on
// which other nodes exist. So:
//
//   - When node j joins, every existing score is unchanged; a key's owner
//     changes only if j's score is now the highest, and then it changes TO j.
//     The fraction of keys that move is P(j wins) = w_j / Σw (Σw including
//     w_j): a fourth node of equal weight takes 1/4 of the keys, all of them
//     from the others in proportion to their weights, and nothing else moves.
//   - When node j leaves, removing a score that was not a key's maximum does
//     not change the maximum: only the keys j owned move, each to its old
//     second candidate (so spill copies are already in the right place).
//   - Changing w_j moves keys only to j (if it grows) or only away from j (if
//     it shrinks).
//
// The cost is O(n) per key for n nodes, about 10-15ns per node (a SplitMix64
// finalizer, a logarithm and a division): tens of nanoseconds for a handful
// of nodes, tens of microseconds for a thousand. Candidates never allocates.
//
// # Exact specification
//
// All integer arithmetic is on unsigned 64-bit words, wrapping; all floating
// point is IEEE 754 binary64 with round-to-nearest-even and no fused
// multiply-add.
//
//  1. Node seed, once per node: seed = mix64(fnv1a64(ID)), where ID is the
//     node's UTF-8 bytes and fnv1a64 is 64-bit FNV-1a (offset basis
//     0xcbf29ce484222325, prime 0x100000001b3: for each byte,
//     h ^= b; h *= prime).
//  2. mix64 is the SplitMix64 finalizer:
//     z ^= z >> 30; z *= 0xbf58476d1ce4e5b9;
//     z ^= z >> 27; z *= 0x94d049bb133111eb;
//     z ^= z >> 31.
//  3. Key word: k = the first 8 bytes of the key read little-endian (keys are
//     SHA-256 outputs, so these bits are already uniform).
//  4. Per (key, node): h = mix64(k ^ seed).
//  5. Uniform: m = (h >> 11) | 1 (the top 53 bits with the lowest forced to
//     one, an odd integer in [1, 2^53)); u = m * 2^-53, exact, so
//     2^-53 <= u <= 1 - 2^-53 and ln(u) is never 0 or -Inf.
//  6. ln(u) is the routine below (FreeBSD's e_log.c, as in Go's pure-Go
//     math.log), every operation separately rounded; not the platform's
//     log, whose last bit differs between libms, and between Go's amd64
//     assembly and its other architectures.
//  7. score = w / (-ln(u)), one IEEE division; w is the node's weight as a
//     binary64 exactly as the View holds it (clients must use the same
//     numbers, e.g. capacity in bytes below 2^53).
//  8. Order: higher score first; equal scores by higher h; equal h (two IDs
//     whose seeds collide) by lower index, i.e. by ID. Nodes are indexed in
//     ascending byte order of ID, which for UTF-8 is Unicode code point
//     order.
//
// The logarithm of step 6, for u in (0,1); frexp returns f1 in [0.5, 1) and
// an integer e with u = f1 * 2^e, and the constants are the binary64 values
// with these bit patterns:
//
//	ln2Hi = 0x3fe62e42fee00000  ln2Lo = 0x3dea39ef35793c76
//	l1 = 0x3fe5555555555593  l2 = 0x3fd999999997fa04  l3 = 0x3fd2492494229359
//	l4 = 0x3fcc71c51d8e78af  l5 = 0x3fc7466496cb03de  l6 = 0x3fc39a09d078c69f
//	l7 = 0x3fc2f112df3e5244  sqrt2/2 = 0x3fe6a09e667f3bcd
//
//	f1, e = frexp(u)
//	if f1 < sqrt2/2 { f1 = f1 * 2; e = e - 1 }
//	f = f1 - 1;  k = float(e)
//	s = f / (2 + f);  s2 = s * s;  s4 = s2 * s2
//	t1 = s2 * (l1 + s4 * (l3 + s4 * (l5 + s4 * l7)))
//	t2 = s4 * (l2 + s4 * (l4 + s4 * l6))
//	r = t1 + t2;  hfsq = 0.5 * f * f   // (0.5 * f) * f
//	ln = k * ln2Hi - ((hfsq - (s * (hfsq + r) + k * ln2Lo)) - f)
//
// testdata/vectors.json holds seeds, hashes, scores (as binary64 bit
// patterns) and rankings for fixed views and keys; testdata/check_vectors.py
// checks that the Python client (python/strata_client/placement.py, the
// Python standard library alone) reproduces them.
package placement

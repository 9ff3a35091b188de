// Package benchmarks measures one strata node over loopback gRPC (put, get
// and lookup throughput and per-operation latency) next to the machine's own
// limits measured in the same run: raw loopback TCP moving the same bytes,
// and memcpy of a page. It holds no library code: the load generator is
// cmd/strata-load, whose engine (and the Redis, loopback TCP and memcpy
// harness these benchmarks share) is the package benchmarks/load. README.md
// gives the commands and the figures.
package benchmarks

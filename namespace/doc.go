// Package namespace defines what makes two KV-cache pages interchangeable
// and how pages are named.
//
// A Descriptor lists everything that decides whether a page computed by one
// engine can be loaded by another: tenant, model and weight revision,
// adapter, tokenizer, engine KV format, dtypes, layout, page geometry and
// shard position. Its canonical encoding (canonical JSON, documented byte
// for byte in README.md and reproducible from Python's standard library) is
// hashed with SHA-256 into the namespace ID, so every node, process and
// language derives the same ID from the same descriptor. The descriptor
// also yields the exact byte size of a page (PageSize) and the checksum that
// guards it (ChecksumOf).
//
// Page keys are content addressed: key_i = SHA-256(key_{i-1} || the page's
// tokens as little-endian uint32), seeded with the namespace ID, so keys of
// different namespaces never alias (PageKeys, AppendPageKeys, NextKey).
// Engines that already hash their pages can keep their own hashes:
// SGLangPageHash and VLLMBlockHash reproduce SGLang's HiCache page hash and
// vLLM's sha256_cbor block hash, and KeyFromEngineHash scopes such a hash
// to a namespace.
//
// Test vectors that other languages can check live in testdata/vectors.json
// (regenerate with `go test ./namespace -run TestVectors -update`).
package namespace

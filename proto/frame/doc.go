// Package frame is the codec of strata's frame protocol: the compact
// binary messages a node serves on its shm control socket (Unix) and its
// raw data plane (TCP), their ops, versions, statuses and error codes.
// SPEC.md in this directory is the protocol's specification; the Go code
// implements it and does not restate it. Sending and receiving frames on
// a socket (fd passing, bulk bytes written and read apart) is package
// transport's.
package frame

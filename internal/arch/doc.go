// Package arch holds no code: its test pins strata's import rules (which
// strata package may import which, the one importer of each external
// system, and the gRPC-free core). Edit the tables in arch_test.go when a
// package is added, moved or allowed a new dependency.
package arch

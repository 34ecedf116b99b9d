// Package integration holds sf2loki's multi-process, real-server tests:
// failover, fault injection and soak runs against the built binary.
//
// Imports: anything; nothing imports it.
package integration

// Package domain is the sf2loki core: the LeaseKeeper that arbitrates
// leadership over any ports.ObjectCAS, the CheckpointCommitter that writes the
// fenced checkpoint document, their records and errors, and the shared retry
// policy for conditional writes.
//
// Imports: the standard library and internal/ports only (enforced by lint).
// It never reads the system clock or sleeps: time comes from an injected
// ports.Clock, so tests and the deterministic simulation control it.
package domain

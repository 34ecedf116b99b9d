// Package domain is the sf2loki core: the LeaseKeeper that arbitrates
// leadership over any ports.ObjectCAS (SoleLeader for a single instance), the
// CheckpointCommitter that writes the fenced checkpoint document, the
// Pipeline that batches the sources' entries into the sink and releases their
// checkpoints in order, the Egress governor, the Membership and Balancer that
// spread shards (orgs) over the replicas, the overlap guard (Owners), the
// RunLock of one-shot commands, their records and errors, and the shared
// retry policy for conditional writes.
//
// Imports: the standard library and internal/ports only (enforced by lint).
// It never reads the system clock or sleeps: time comes from an injected
// ports.Clock, so tests and the deterministic simulation control it.
package domain

// Package porttest holds what tests need to exercise the ports: the ObjectCAS
// contract suite (RunObjectCAS) that every adapter runs against its real
// server, the in-memory MemoryCAS with fault injection, and FakeClock, a
// manually advanced ports.Clock.
//
// It is test support: production code must not import it. Imports: the
// standard library, testing, and internal/ports.
package porttest

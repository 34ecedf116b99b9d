// Package ports declares the interfaces the sf2loki core needs from the
// outside world: ObjectCAS (one small document with compare-and-swap), Clock
// (time, injectable so the core is deterministic under test), and Source and
// Sink (what produces entries and where they are pushed), together with the
// sentinel errors, the transient-error classification and the send gate
// (a lease fence carried by a push's context) every adapter must honour.
//
// Imports: the standard library only. The domain (internal/domain) depends on
// this package; adapters (internal/adapters/...) implement it. The contract
// suite and the in-memory fakes live in the porttest subpackage.
package ports

package domain

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors of the core. Callers check them with errors.Is; the typed
// errors below carry the detail and unwrap to them.
var (
	// ErrFenced means a write was refused because this process no longer has
	// the authority to write: leadership was lost, the self-fencing deadline
	// passed, or the checkpoint document carries a newer leader's epoch.
	// Nothing was written. The pipeline must stop; the next leader owns the
	// checkpoints.
	ErrFenced = errors.New("fenced: this process no longer holds leadership")

	// ErrConflict means a checkpoint write lost its compare-and-swap to a
	// write this process did not make. Nothing was written. The caller must
	// Reset, reload and decide again (the app demotes the pipeline in place).
	ErrConflict = errors.New("checkpoint conflict: the document was changed by another writer")

	// ErrCorrupt means a stored document could not be understood. It is never
	// overwritten: an operator must repair or remove it.
	ErrCorrupt = errors.New("corrupt document")
	// ErrWrongOrg means a checkpoint document holds another org's positions.
	ErrWrongOrg = errors.New("the checkpoint document belongs to another org")

	// ErrInvalidConfig means a constructor was given a configuration that
	// cannot work.
	ErrInvalidConfig = errors.New("invalid configuration")

	// ErrStalled means the pipeline had entries waiting while no push and no
	// commit succeeded for the stall timeout. The leader resigns so that
	// another replica can try.
	ErrStalled = errors.New("pipeline stalled")
)

// StalledError is the liveness guard's verdict. It unwraps to ErrStalled.
type StalledError struct {
	// Lane is the lane that stalled, or "checkpoint" for the committer.
	Lane string
	// For is how long nothing was pushed or committed.
	For time.Duration
	// Pending is how many entries were waiting.
	Pending int64
}

func (e *StalledError) Error() string {
	if e.Lane == checkpointLane {
		return fmt.Sprintf("pipeline stalled: %d checkpoint keys accepted by the sink and no successful commit for %s; "+
			"check the state store (sf2loki doctor reads and writes it)", e.Pending, e.For.Round(time.Second))
	}
	return fmt.Sprintf("pipeline stalled: %d entries waiting in the %s lane and nothing delivered there for %s; "+
		"check sink.loki (sf2loki doctor pushes a test entry) and the state store", e.Pending, e.Lane, e.For.Round(time.Second))
}

// Unwrap returns ErrStalled.
func (e *StalledError) Unwrap() error { return ErrStalled }

// FenceError is a refusal to write because authority was lost. It unwraps to
// ErrFenced.
type FenceError struct {
	// Holder is this process's holder id.
	Holder string
	// Lease names the lease object (or the checkpoint object for an epoch
	// fence).
	Lease string
	// Reason says why: "leadership lost", "self-fencing deadline passed",
	// "checkpoint document carries epoch 8, ours is 7".
	Reason string
}

func (e *FenceError) Error() string {
	return fmt.Sprintf("write refused: holder %q no longer holds %s (%s); the current leader owns the checkpoints", e.Holder, e.Lease, e.Reason)
}

// Unwrap returns ErrFenced.
func (e *FenceError) Unwrap() error { return ErrFenced }

// ConflictError is a lost checkpoint compare-and-swap. It unwraps to
// ErrConflict and to the store's error.
type ConflictError struct {
	// Object names the checkpoint object.
	Object string
	// Op is "commit", "delete" or "claim".
	Op string
	// Err is the store's answer (wrapping ports.ErrPreconditionFailed).
	Err error
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s to %s lost its compare-and-swap: another writer changed the checkpoint document (reset and reload it; if two deployments share this object, give each its own): %v", e.Op, e.Object, e.Err)
}

// Unwrap returns ErrConflict and the store's error.
func (e *ConflictError) Unwrap() []error { return []error{ErrConflict, e.Err} }

// CorruptError describes a stored document that cannot be understood. It
// unwraps to ErrCorrupt.
type CorruptError struct {
	// Object names the stored object.
	Object string
	// Problem says what is wrong with it.
	Problem string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s is corrupt: %s; sf2loki will not overwrite it: stop the replicas, move it aside and import an earlier export "+
		"(sf2loki state import --if-empty), or start without it, which resets every source to its lookback and re-ingests (sf2loki doctor prints the commands)", e.Object, e.Problem)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

func configErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// WrongOrgError is a claim of a document stamped with another org (OrgKey).
// It unwraps to ErrWrongOrg.
type WrongOrgError struct {
	Document   string
	Org, Owner string
}

func (e *WrongOrgError) Error() string {
	return fmt.Sprintf("org %s: the checkpoint document %s holds the positions of org %s; the orgs were probably reordered "+
		"(the first org listed keeps the configured lease and checkpoint objects): list %s first again, "+
		"or point org %s at its own document", e.Org, e.Document, e.Owner, e.Owner, e.Org)
}

// Unwrap returns ErrWrongOrg.
func (e *WrongOrgError) Unwrap() error { return ErrWrongOrg }

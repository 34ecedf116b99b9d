package domain

import "time"

// EventKind names a transition the core reports.
type EventKind string

// The transitions the LeaseKeeper and CheckpointCommitter report.
const (
	// EventAcquired: this process won the lease (create-only or takeover).
	EventAcquired EventKind = "acquired"
	// EventRenewed: a renewal landed on its first try.
	EventRenewed EventKind = "renewed"
	// EventRenewedAfterFailure: a renewal landed after one or more failed
	// renewal rounds (Failures says how many).
	EventRenewedAfterFailure EventKind = "renewed_after_failure"
	// EventRenewFailed: a renewal round failed without losing the lease (a
	// transient error that outlasted the retries); leadership continues until
	// the self-fencing deadline.
	EventRenewFailed EventKind = "renew_failed"
	// EventLost: leadership ended because another process took the lease (a
	// lost compare-and-swap), or as planned on a graceful stop or a
	// resignation (Graceful; Reason says which).
	EventLost EventKind = "lost"
	// EventFenced: leadership ended because the self-fencing deadline passed
	// without a successful renewal.
	EventFenced EventKind = "fenced"
	// EventReleased: the lease was released on graceful stop (holder cleared,
	// epoch kept) so a standby can take over at once.
	EventReleased EventKind = "released"
	// EventObserved: a standby read the lease held by another process
	// (LeaseHolder, at Epoch): reported at its first such read and whenever
	// the holder or the epoch changes, not at every poll.
	EventObserved EventKind = "observed"
	// EventLostRace: an acquisition attempt lost its compare-and-swap.
	EventLostRace EventKind = "lost_race"
	// EventRecoveredLostAck: a retried write failed its precondition, but
	// re-reading showed the earlier attempt had landed; the write counts as
	// done and the new version was adopted.
	EventRecoveredLostAck EventKind = "recovered_lost_ack"
	// EventCommitted: a checkpoint write landed.
	EventCommitted EventKind = "committed"
	// EventClaimed: the checkpoint document was stamped with a new epoch.
	EventClaimed EventKind = "claimed"
	// EventConflict: a checkpoint write lost its compare-and-swap.
	EventConflict EventKind = "conflict"
	// EventCommitFenced: a checkpoint write was refused by the fence.
	EventCommitFenced EventKind = "commit_fenced"
	// EventPushFenced: a push was stopped by the fence (before it was sent,
	// or while it was being sent); its batch is abandoned uncommitted.
	EventPushFenced EventKind = "push_fenced"
	// EventCommitFailed: a checkpoint write failed for another reason.
	EventCommitFailed EventKind = "commit_failed"
)

// AcquiredFrom says what state a lease was in when this process acquired
// it: a take-over of a stale lease is unplanned (its holder died, froze or
// lost its store); the others are planned or a first start.
type AcquiredFrom string

// The states an acquired lease was in (Event.From).
const (
	// FromAbsent: no lease object (a first start, or one deleted).
	FromAbsent AcquiredFrom = "absent"
	// FromReleased: its holder released it (a graceful stop or a hand-off).
	FromReleased AcquiredFrom = "released"
	// FromOwn: it named this very process (a restart of the keeper).
	FromOwn AcquiredFrom = "own"
	// FromStale: its holder let it go unchanged for its ttl.
	FromStale AcquiredFrom = "stale"
)

// AcquiredFroms are every AcquiredFrom, for exporters that list them.
var AcquiredFroms = []AcquiredFrom{FromAbsent, FromReleased, FromOwn, FromStale}

// Event is one report from the core. The app turns events into metrics,
// spans and logs; the core itself imports no telemetry library.
type Event struct {
	Kind EventKind
	// At is the reporting process's clock reading.
	At time.Time
	// Holder and Instance identify this process.
	Holder   string
	Instance string
	// Epoch is the leadership epoch the event concerns (0 when none).
	Epoch uint64
	// Backend names the object the event concerns (ObjectCAS.String()).
	Backend string
	// Reason is a short human explanation.
	Reason string
	// Failures counts consecutive failed renewal rounds before this event.
	Failures int
	// Attempts is how many requests the write took.
	Attempts int
	// Duration is how long the operation took on the process's clock.
	Duration time.Duration
	// Err is the error behind a failure event.
	Err error
	// LeaseHolder is the lease's holder as a standby read it (EventObserved).
	LeaseHolder string
	// Graceful is true when leadership ends as planned (EventLost on a
	// graceful stop or a resignation): the lease is released next.
	Graceful bool
	// From is the state the lease was in when it was acquired
	// (EventAcquired).
	From AcquiredFrom
}

// Observer receives the core's events. Implementations must be fast and
// must not call back into the reporting component.
type Observer interface {
	Observe(Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

type nopObserver struct{}

func (nopObserver) Observe(Event) {}

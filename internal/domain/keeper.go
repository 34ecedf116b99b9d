package domain

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// Lease defaults.
const (
	DefaultLeaseTTL      = 30 * time.Second
	DefaultRenewInterval = 10 * time.Second
)

// LeaseConfig configures a LeaseKeeper.
type LeaseConfig struct {
	// Holder identifies this replica in the lease document (required).
	Holder string
	// Instance identifies this process lifetime; empty generates a random
	// one. Two processes must never share an instance.
	Instance string
	// TTL is how long a standby must see the lease's Version unchanged, on
	// its own clock, before taking over (must be > 0; default 30s in config).
	TTL time.Duration
	// RenewInterval is how often the leader renews and a standby polls (must
	// satisfy 0 < RenewInterval < TTL/2; default 10s in config).
	RenewInterval time.Duration
	// RequestTimeout bounds each request to the lease object (must be below
	// RenewInterval; 0 means RenewInterval/2).
	RequestTimeout time.Duration
	// Retry bounds retries of transient failures within one renewal or
	// acquisition (zero fields take the defaults).
	Retry RetryPolicy
	// EpochFloor, if set, is read before every acquisition: the new epoch is
	// above it. The app passes the checkpoint document's stored epoch, so a
	// deleted or corrupt lease can never restart epochs below it.
	EpochFloor func(ctx context.Context) (uint64, error)
	// Gate, if set, is asked before claiming a lease that is free (absent,
	// released or stale): the shard balance (see Balance). It does not gate
	// a renewal.
	Gate ClaimGate
	// Observer receives every transition (nil discards them).
	Observer Observer
	// Logger receives diagnostic logs (nil discards them).
	Logger *slog.Logger
	// Poll, when true, makes a standby poll the lease every RenewInterval
	// even when its store can watch it (ports.Watcher).
	Poll bool
}

// ClaimGate gates a keeper's claims of a free lease: the shard balance.
type ClaimGate interface {
	// MayClaim is asked before claiming a free lease: false leaves it to
	// another replica. True reserves the claim until ClaimEnded.
	MayClaim() bool
	// ClaimEnded is called once a claim MayClaim allowed has landed (the
	// keeper's role is already leader) or failed.
	ClaimEnded()
}

// Role is a LeaseKeeper's current role.
type Role int

// Roles.
const (
	RoleStandby Role = iota
	RoleLeader
)

func (r Role) String() string {
	if r == RoleLeader {
		return "leader"
	}
	return "standby"
}

// Transition is what a Step changed.
type Transition int

// Transitions.
const (
	TransitionNone Transition = iota
	TransitionAcquired
	TransitionLost
)

// StepResult is the outcome of one Step.
type StepResult struct {
	// Role after the step.
	Role Role
	// Transition the step made, if any.
	Transition Transition
	// Epoch held after the step (0 for a standby).
	Epoch uint64
	// Next is when to Step again, relative to now.
	Next time.Duration
	// Reason explains the step's decision, for logs and tests.
	Reason string
	// Err is what went wrong in this step, if anything (informational: the
	// keeper has already acted on it).
	Err error
}

// Status is a snapshot of a LeaseKeeper for health endpoints.
type Status struct {
	Role     Role
	Holder   string
	Instance string
	Epoch    uint64
	Lease    string
	// LastRenewal is when the last successful write of the lease was sent.
	LastRenewal time.Time
	// FenceDeadline is when this leader's authority expires without a
	// further renewal.
	FenceDeadline time.Time
	Version       ports.Version
	// Decided is true once the keeper has completed its first step: it
	// knows whether it leads.
	Decided bool
	// LastObserved is when the lease was last read (standby) or written
	// (leader) successfully; TTL is the lease's ttl. A standby that observed
	// the lease within TTL is able to take over.
	LastObserved time.Time
	TTL          time.Duration
	// LeaseHolder and LeaseEpoch are the lease's holder and epoch as last
	// read (standby) or written (leader); LeaseHolder is empty for a
	// released or absent lease. LeaseUnchangedFor is how long a standby has
	// seen the lease's Version unchanged.
	LeaseHolder string
	LeaseEpoch  uint64
	// LeaseInstance is the process the lease names as last read (on a
	// released lease, the process that released it).
	LeaseInstance     string
	LeaseUnchangedFor time.Duration
	// Free is true when the last read found the lease claimable: absent,
	// released, or unchanged for longer than its ttl.
	Free bool
	// Departed is the holder that released the lease as it stopped, when
	// the last read found such a release (the balance counts it gone).
	Departed string
	// Blocked, when set, says why this standby does not contend for the
	// lease: one of the Blocked* codes. BlockedDetail says what happened
	// and what to do.
	Blocked       string
	BlockedDetail string
	// Watching is true while a standby learns of the lease's changes from
	// its store's watch instead of polling; WatchBroken says why a watch it
	// had is down (it polls meanwhile).
	Watching    bool
	WatchBroken string
}

// Why a standby does not contend (Status.Blocked).
const (
	// BlockedCheckpointCorrupt: the checkpoint document, whose epoch is the
	// floor of every new epoch, cannot be decoded.
	BlockedCheckpointCorrupt = "checkpoint_corrupt"
	// BlockedCheckpointUnreadable: the checkpoint document cannot be read.
	BlockedCheckpointUnreadable = "checkpoint_unreadable"
	// BlockedEpochExhausted: the next epoch would pass MaxEpoch.
	BlockedEpochExhausted = "epoch_exhausted"
	// BlockedLeaseUnreadable: reading the lease fails for a reason a retry
	// does not fix (permission, missing bucket).
	BlockedLeaseUnreadable = "lease_unreadable"
	// BlockedResigned: this replica gave up leadership (Resign) and holds
	// off so that another replica can try.
	BlockedResigned = "resigned"
)

// foreignTTLCap bounds the ttl a standby honours from a lease record: a
// foreign writer's "ttl":"2000000h" must not block every replica forever.
const foreignTTLCap = 10

// Leadership describes a won lease, passed to Callbacks.OnAcquire.
type Leadership struct {
	Epoch    uint64
	Holder   string
	Instance string
}

// Loss describes the end of leadership, passed to Callbacks.OnLose.
type Loss struct {
	Epoch  uint64
	Reason string
	// Graceful is true when leadership ends because Run's context ended:
	// the fence stays valid until OnLose returns, so the work can drain and
	// commit, and the lease is released afterwards.
	Graceful bool
}

// Callbacks connect leadership to the work it guards.
type Callbacks struct {
	// OnAcquire starts the leader's work. ctx ends when leadership ends. It
	// must return promptly (start goroutines; do not block).
	OnAcquire func(ctx context.Context, l Leadership)
	// OnLose stops the work OnAcquire started and returns when it has
	// stopped. On a non-graceful loss the fence already fails.
	OnLose func(l Loss)
}

// LeaseKeeper holds a lease on one ObjectCAS object: standby, acquire, hold
// and renew, lose, standby, until its context ends.
//
// Staleness is judged on the observer's own clock: a standby remembers the
// lease's Version and when it first saw it, and may contest only after TTL
// of that Version unchanged. Leader-written timestamps are never read.
// A leader's authority expires at sentAt(last successful renewal) + TTL -
// RenewInterval/2 on its own clock, so it always steps down before any
// standby can take over.
//
// Step is the state machine (observe, decide, write); Run is a thin driver
// around it. CheckFence and Status are safe for concurrent use.
type LeaseKeeper struct {
	cas   ports.ObjectCAS
	clock ports.Clock
	cfg   LeaseConfig
	req   requester
	obs   Observer
	log   *slog.Logger

	mu         sync.Mutex
	role       Role
	version    ports.Version // leader: the lease's current Version
	record     LeaseRecord   // leader: what was last written
	lastSentAt time.Time     // leader: when the last successful write was sent
	deadline   time.Time     // leader: self-fencing deadline
	failures   int           // leader: consecutive failed renewal rounds
	lostReason string        // why the last leadership ended
	seen       bool          // standby: an observation is running
	seenVer    ports.Version // standby: the Version being observed
	seenAt     time.Time     // standby: when seenVer was first seen
	maxEpoch   uint64        // highest epoch seen in any lease record
	decided    bool          // a step has completed
	observedAt time.Time     // the last successful read or renewal
	leaseRec   LeaseRecord   // the lease as last read or written
	blocked    string        // why a standby does not contend (Blocked*)
	blockedWhy string        // what happened and what to do
	holdUntil  time.Time     // after Resign: no claim before this
	holdWhy    string        // after Resign: why
	ttlWarned  string        // the holder/ttl last warned about
	free       bool          // standby: the last read found the lease claimable
	told       LeaseRecord   // the holder and epoch last reported (EventObserved) or won
	watching   bool          // standby: a live watch reports the lease's changes
	watchWhy   string        // standby: why the watch is down
	resign     chan resignation
}

// resignation is a Resign request.
type resignation struct {
	reason  string
	holdOff time.Duration
}

// NewLeaseKeeper validates cfg and returns a keeper in standby.
func NewLeaseKeeper(cas ports.ObjectCAS, clock ports.Clock, cfg LeaseConfig) (*LeaseKeeper, error) {
	switch {
	case cas == nil || clock == nil:
		return nil, configErrorf("lease keeper needs an object store and a clock")
	case cfg.Holder == "":
		return nil, configErrorf("lease holder id must not be empty")
	case cfg.TTL <= 0:
		return nil, configErrorf("lease ttl must be > 0, got %s", cfg.TTL)
	case cfg.RenewInterval <= 0 || cfg.RenewInterval >= cfg.TTL/2:
		return nil, configErrorf("lease renew_interval must satisfy 0 < renew_interval < ttl/2 (ttl %s allows < %s), got %s", cfg.TTL, cfg.TTL/2, cfg.RenewInterval)
	case cfg.RequestTimeout < 0 || cfg.RequestTimeout >= cfg.RenewInterval:
		return nil, configErrorf("lease request timeout must be below renew_interval %s, got %s", cfg.RenewInterval, cfg.RequestTimeout)
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = cfg.RenewInterval / 2
	}
	cfg.Retry = cfg.Retry.withDefaults()
	if err := cfg.Retry.validate(); err != nil {
		return nil, err
	}
	if cfg.Instance == "" {
		cfg.Instance = newInstanceID()
	}
	k := &LeaseKeeper{
		cas:    cas,
		clock:  clock,
		cfg:    cfg,
		req:    requester{cas: cas, clock: clock, policy: cfg.Retry, timeout: cfg.RequestTimeout},
		obs:    cfg.Observer,
		log:    cfg.Logger,
		resign: make(chan resignation, 1),
	}
	if k.obs == nil {
		k.obs = nopObserver{}
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	k.log = k.log.With("lease", cas.String(), "holder", cfg.Holder, "instance", cfg.Instance)
	return k, nil
}

func newInstanceID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Instance returns this process's instance id.
func (k *LeaseKeeper) Instance() string { return k.cfg.Instance }

// Status returns a snapshot.
func (k *LeaseKeeper) Status() Status {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := Status{Role: k.role, Holder: k.cfg.Holder, Instance: k.cfg.Instance, Lease: k.cas.String(), Decided: k.decided,
		LastObserved: k.observedAt, TTL: k.cfg.TTL, LeaseHolder: k.leaseRec.Holder, LeaseEpoch: k.leaseRec.Epoch,
		LeaseInstance: k.leaseRec.Instance}
	if k.role == RoleLeader {
		s.Epoch, s.LastRenewal, s.FenceDeadline, s.Version = k.record.Epoch, k.lastSentAt, k.deadline, k.version
		s.LeaseHolder, s.LeaseEpoch = k.record.Holder, k.record.Epoch
		return s
	}
	if k.seen {
		s.LeaseUnchangedFor = k.clock.Now().Sub(k.seenAt)
	}
	s.Free = k.free
	if k.free && k.leaseRec.Holder == "" {
		s.Departed = k.leaseRec.Departed
	}
	s.Blocked, s.BlockedDetail = k.blocked, k.blockedWhy
	s.Watching, s.WatchBroken = k.watching, k.watchWhy
	return s
}

// Epoch returns the epoch held, or 0 on a standby.
func (k *LeaseKeeper) Epoch() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.role != RoleLeader {
		return 0
	}
	return k.record.Epoch
}

// CheckFence returns nil while this process may write as leader, and a
// *FenceError (ErrFenced) once leadership was lost or the self-fencing
// deadline has passed, even if the renewal loop is stuck in a request.
func (k *LeaseKeeper) CheckFence() error {
	_, err := k.FenceDeadline()
	return err
}

// FenceDeadline is CheckFence with, while the fence is open, the moment it
// closes unless a renewal lands first: a push may run until then and no
// longer.
func (k *LeaseKeeper) FenceDeadline() (time.Time, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.role != RoleLeader {
		reason := k.lostReason
		if reason == "" {
			reason = "never acquired"
		}
		return time.Time{}, &FenceError{Holder: k.cfg.Holder, Lease: k.cas.String(), Reason: reason}
	}
	if now := k.clock.Now(); !now.Before(k.deadline) {
		return time.Time{}, &FenceError{Holder: k.cfg.Holder, Lease: k.cas.String(),
			Reason: fmt.Sprintf("self-fencing deadline passed %s ago without a successful renewal", now.Sub(k.deadline))}
	}
	return k.deadline, nil
}

// emit reports events; never call it with k.mu held.
func (k *LeaseKeeper) emit(events ...Event) {
	for _, e := range events {
		k.obs.Observe(e)
	}
}

func (k *LeaseKeeper) event(kind EventKind, epoch uint64, reason string) Event {
	return Event{Kind: kind, At: k.clock.Now(), Holder: k.cfg.Holder, Instance: k.cfg.Instance,
		Epoch: epoch, Backend: k.cas.String(), Reason: reason}
}

// Step performs one round of the state machine: a standby observes the lease
// and, if it is claimable, writes a claim; a leader writes one renewal (no
// read first: the cached Version is the precondition, and a lost CAS reveals
// a takeover).
func (k *LeaseKeeper) Step(ctx context.Context) StepResult {
	k.mu.Lock()
	role := k.role
	k.mu.Unlock()
	var res StepResult
	if role == RoleLeader {
		res = k.renew(ctx)
	} else {
		res = k.observeAndClaim(ctx)
	}
	k.mu.Lock()
	k.decided = true
	k.mu.Unlock()
	return res
}

// claimDecision is what a standby decided from one observation.
type claimDecision struct {
	claim  bool
	pre    ports.Precondition
	epoch  uint64        // the superseded lease's epoch (0 if none or unknown)
	wait   time.Duration // when to look again if not claiming
	reason string
	from   AcquiredFrom // the lease's state, when claiming
	// observed, when set, reports a holder or an epoch not reported before.
	observed *Event
}

// decide judges one read of the lease. k.mu held.
func (k *LeaseKeeper) decide(obj ports.Object, err error, now time.Time) claimDecision {
	r := k.cfg.RenewInterval
	switch {
	case errors.Is(err, ports.ErrNotFound):
		k.seen = false
		return claimDecision{claim: true, pre: ports.CreateOnly(), reason: "lease absent", from: FromAbsent}
	case err != nil:
		// Transient or otherwise unknown: never "absent", never a write.
		return claimDecision{wait: r, reason: fmt.Sprintf("cannot read the lease, not contesting: %v", err)}
	}
	rec, derr := DecodeLeaseRecord(obj.Data)
	k.leaseRec = rec
	if derr != nil {
		k.leaseRec = LeaseRecord{Holder: "(unreadable)"}
	}
	if derr == nil {
		k.maxEpoch = max(k.maxEpoch, rec.Epoch)
		switch {
		case rec.Holder == "":
			return claimDecision{claim: true, pre: ports.IfVersion(obj.Version), epoch: rec.Epoch, reason: "lease released", from: FromReleased}
		case rec.Instance == k.cfg.Instance:
			return claimDecision{claim: true, pre: ports.IfVersion(obj.Version), epoch: rec.Epoch, reason: "lease names this process", from: FromOwn}
		}
	}
	if !k.seen || obj.Version != k.seenVer {
		k.seen, k.seenVer, k.seenAt = true, obj.Version, now
	}
	ttl := max(k.cfg.TTL, rec.ttl())
	if limit := foreignTTLCap * k.cfg.TTL; ttl > limit {
		ttl = limit
		if warned := rec.Holder + "/" + rec.TTL; k.ttlWarned != warned {
			k.ttlWarned = warned
			k.log.Warn("the lease names a ttl far above ours; honouring at most 10x our ttl", "lease_holder", rec.Holder,
				"lease_ttl", rec.TTL, "honoured", limit, "hint", "every replica must run with the same ttl (a holder that renews less often than "+
					"10x our ttl can be taken over while it still leads: duplicates in Loki, though the epoch fence keeps checkpoints safe); "+
					"another deployment may share this lease object: give each its own")
		}
	}
	held := now.Sub(k.seenAt)
	what := fmt.Sprintf("held by %q", rec.Holder)
	var observed *Event
	if derr != nil {
		what = fmt.Sprintf("unreadable (%v)", derr)
	} else {
		observed = k.noteHolderLocked(rec)
	}
	if held < ttl {
		wait := min(r, ttl-held)
		if k.watching {
			// The watch reports every change: look again only when this
			// version would have gone stale (a read then confirms it), or
			// before a ttl passes without an observation (readiness counts
			// on one; a watch that went silent is caught by it).
			wait = min(ttl-held, k.cfg.TTL-r)
		}
		return claimDecision{wait: wait, reason: fmt.Sprintf("lease %s, unchanged for %s of %s", what, held.Round(time.Millisecond), ttl),
			observed: observed}
	}
	return claimDecision{claim: true, pre: ports.IfVersion(obj.Version), epoch: rec.Epoch, from: FromStale,
		reason: fmt.Sprintf("lease %s is stale: unchanged for %s", what, held.Round(time.Millisecond)), observed: observed}
}

// noteHolderLocked returns the EventObserved that reports rec's holder and
// epoch when they differ from the ones last reported (or won), else nil.
// k.mu held.
func (k *LeaseKeeper) noteHolderLocked(rec LeaseRecord) *Event {
	if rec.Holder == k.told.Holder && rec.Epoch == k.told.Epoch {
		return nil
	}
	why := "the first read of the lease by this process"
	switch {
	case k.told.Holder == "":
	case k.told.Instance == k.cfg.Instance:
		why = fmt.Sprintf("taken over from this process (epoch %d)", k.told.Epoch)
	default:
		why = fmt.Sprintf("was held by %s (epoch %d)", k.told.Holder, k.told.Epoch)
	}
	if rec.Holder == k.cfg.Holder {
		why += fmt.Sprintf("; the holder is this replica's id in an earlier process (instance %s), taken over once the lease is unchanged for ttl", rec.Instance)
	}
	k.told = rec
	ev := k.event(EventObserved, rec.Epoch, why)
	ev.LeaseHolder = rec.Holder
	return &ev
}

func (k *LeaseKeeper) observeAndClaim(ctx context.Context) StepResult {
	obj, err := k.req.getOnce(ctx)
	return k.judge(ctx, obj, err)
}

// judge decides on one observation of the lease, a read or a watch's
// change, and claims the lease if it is claimable.
func (k *LeaseKeeper) judge(ctx context.Context, obj ports.Object, err error) StepResult {
	r := k.cfg.RenewInterval
	if errors.Is(err, ports.ErrTooLarge) {
		// Judged as an unreadable lease: taken over after ttl unchanged.
		obj, err = ports.Object{Version: obj.Version, Data: []byte("(larger than the size cap)")}, nil
	}
	// The observation starts when the answer arrives, not when the request
	// left: a delayed read can return a Version written long after it was
	// sent, and the window must not include time before that write.
	now := k.clock.Now()
	k.mu.Lock()
	if err == nil || errors.Is(err, ports.ErrNotFound) {
		k.observedAt = now
	}
	d := k.decide(obj, err, now)
	if err == nil || errors.Is(err, ports.ErrNotFound) {
		k.free = d.claim
	}
	holding := now.Before(k.holdUntil)
	holdWhy := k.holdWhy
	k.mu.Unlock()
	if d.observed != nil {
		k.emit(*d.observed)
	}
	switch {
	case err != nil && !errors.Is(err, ports.ErrNotFound) && !ports.IsTransient(err) && ctx.Err() == nil:
		k.setBlocked(BlockedLeaseUnreadable, fmt.Sprintf("reading the lease %s fails: %v; fix what it names: the store's credentials or permissions, or the coordinate settings (sf2loki doctor checks them)", k.cas, err))
		return StepResult{Role: RoleStandby, Next: r, Reason: d.reason, Err: err}
	case holding:
		k.setBlocked(BlockedResigned, holdWhy)
		return StepResult{Role: RoleStandby, Next: r, Reason: "holding off after resigning: " + holdWhy}
	case !d.claim:
		if err == nil {
			k.setBlocked("", "") // a read that failed transiently changes nothing
		}
		return StepResult{Role: RoleStandby, Next: d.wait, Reason: d.reason, Err: err}
	}
	var floor uint64
	if k.cfg.EpochFloor != nil {
		f, ferr := k.cfg.EpochFloor(ctx)
		if ferr != nil {
			code, what := BlockedCheckpointUnreadable, "cannot be read"
			switch {
			case errors.Is(ferr, ErrCorrupt):
				code, what = BlockedCheckpointCorrupt, "is corrupt"
			case ports.IsTransient(ferr) || ctx.Err() != nil:
				// A passing outage: not contesting this round, and the
				// reason (if any) stays as it was.
				return StepResult{Role: RoleStandby, Next: r, Reason: "cannot read the epoch floor, not contesting", Err: ferr}
			}
			k.setBlocked(code, fmt.Sprintf("the checkpoint document %s; every new epoch must exceed the one it stores, so no replica can lead "+
				"until it is repaired (sf2loki doctor shows how): %v", what, ferr))
			return StepResult{Role: RoleStandby, Next: r, Reason: "cannot read the epoch floor, not contesting", Err: ferr}
		}
		floor = f
	}
	k.mu.Lock()
	top := max(d.epoch, k.maxEpoch, floor)
	k.mu.Unlock()
	if top >= MaxEpoch {
		k.setBlocked(BlockedEpochExhausted, fmt.Sprintf("the lease or the checkpoint document carries epoch %d, the maximum (%d), so no new epoch can be issued; "+
			"stop every replica, then `sf2loki state set --force-reserved %s 1` and delete the lease object", top, MaxEpoch, FenceEpochKey))
		return StepResult{Role: RoleStandby, Next: r, Reason: "epoch exhausted, not contesting"}
	}
	k.setBlocked("", "")
	// The balance is asked last, so that a lease no replica can take
	// (blocked above) is known as such to every replica, not only to the
	// one the balance would let claim it.
	if k.cfg.Gate != nil {
		if !k.cfg.Gate.MayClaim() {
			return StepResult{Role: RoleStandby, Next: r, Reason: d.reason + "; not contending: the shard balance leaves it to another replica"}
		}
		defer k.cfg.Gate.ClaimEnded()
	}
	epoch := top + 1
	wall := now.UTC()
	rec := LeaseRecord{Holder: k.cfg.Holder, Instance: k.cfg.Instance, Epoch: epoch, TTL: k.cfg.TTL.String(),
		AcquiredAt: wall, RenewedAt: wall, ExpiresAt: wall.Add(k.cfg.TTL)}
	// The claim rests on the read just made: a lost compare-and-swap now is
	// another writer's, whatever an earlier write of ours did.
	k.req.unknown = nil
	res, werr := k.req.put(ctx, rec.Encode(), d.pre, nil)
	if werr != nil {
		if errors.Is(werr, errLostCAS) {
			k.emit(k.event(EventLostRace, epoch, d.reason+"; another process won: "+werr.Error()))
		} else {
			k.log.Warn("lease acquisition failed", "epoch", epoch, "error", werr)
		}
		return StepResult{Role: RoleStandby, Next: r, Reason: d.reason + "; acquisition failed", Err: werr}
	}
	k.mu.Lock()
	k.role, k.version, k.record, k.failures, k.lostReason = RoleLeader, res.version, rec, 0, ""
	k.lastSentAt, k.deadline = res.sentAt, k.fenceDeadline(res.sentAt)
	k.observedAt = k.clock.Now()
	k.maxEpoch = max(k.maxEpoch, epoch)
	k.seen = false
	k.told = rec
	k.mu.Unlock()
	events := []Event{}
	if res.recovered {
		events = append(events, k.event(EventRecoveredLostAck, epoch, "acquisition landed though its acknowledgement was lost"))
	}
	ev := k.event(EventAcquired, epoch, d.reason)
	ev.Attempts, ev.From = res.attempts, d.from
	k.emit(append(events, ev)...)
	return StepResult{Role: RoleLeader, Transition: TransitionAcquired, Epoch: epoch,
		Next: k.untilNextRenewal(res.sentAt), Reason: d.reason}
}

// fenceDeadline is when a leader whose last successful write was sent at
// sentAt must stop acting as leader.
func (k *LeaseKeeper) fenceDeadline(sentAt time.Time) time.Time {
	return sentAt.Add(k.cfg.TTL - k.cfg.RenewInterval/2)
}

func (k *LeaseKeeper) untilNextRenewal(sentAt time.Time) time.Duration {
	return max(0, sentAt.Add(k.cfg.RenewInterval).Sub(k.clock.Now()))
}

func (k *LeaseKeeper) renew(ctx context.Context) StepResult {
	now := k.clock.Now()
	k.mu.Lock()
	if !now.Before(k.deadline) {
		ev := k.demoteLocked(EventFenced, "self-fencing deadline passed without a successful renewal")
		k.mu.Unlock()
		k.emit(ev)
		return StepResult{Role: RoleStandby, Transition: TransitionLost, Reason: ev.Reason}
	}
	rec := k.record
	rec.Renewals++
	wall := now.UTC()
	rec.RenewedAt, rec.ExpiresAt = wall, wall.Add(k.cfg.TTL)
	pre, deadline, epoch := ports.IfVersion(k.version), k.deadline, rec.Epoch
	k.mu.Unlock()

	// The write may not outlive our authority.
	wctx, _, cancel := withClockTimeout(ctx, k.clock, deadline.Sub(now))
	res, err := k.req.put(wctx, rec.Encode(), pre, nil)
	cancel()
	after := k.clock.Now()

	k.mu.Lock()
	if k.role != RoleLeader {
		k.mu.Unlock()
		return StepResult{Role: RoleStandby, Next: k.cfg.RenewInterval, Reason: "leadership ended during renewal"}
	}
	switch {
	case !after.Before(k.deadline):
		ev := k.demoteLocked(EventFenced, "self-fencing deadline passed during renewal")
		ev.Err = err
		k.mu.Unlock()
		k.emit(ev)
		return StepResult{Role: RoleStandby, Transition: TransitionLost, Reason: ev.Reason, Err: err}
	case err == nil:
		k.version, k.record, k.lastSentAt, k.deadline = res.version, rec, res.sentAt, k.fenceDeadline(res.sentAt)
		k.observedAt = after
		failures := k.failures
		k.failures = 0
		k.mu.Unlock()
		var events []Event
		switch {
		case res.adopted:
			k.log.Warn("an earlier renewal whose outcome was unknown had landed; adopted its version and renewed on top of it", "epoch", epoch, "attempts", res.attempts)
			events = append(events, k.event(EventRecoveredLostAck, epoch, "an earlier renewal whose outcome was unknown had landed"))
		case res.recovered:
			k.log.Warn("renewal landed though its acknowledgement was lost; adopted the new version", "epoch", epoch, "attempts", res.attempts)
			events = append(events, k.event(EventRecoveredLostAck, epoch, "renewal landed though its acknowledgement was lost"))
		}
		ev := k.event(EventRenewed, epoch, "renewed")
		if failures > 0 {
			ev = k.event(EventRenewedAfterFailure, epoch, fmt.Sprintf("renewed after %d failed rounds", failures))
		}
		ev.Failures, ev.Attempts, ev.Duration = failures, res.attempts, after.Sub(now)
		k.emit(append(events, ev)...)
		return StepResult{Role: RoleLeader, Epoch: epoch, Next: k.untilNextRenewal(res.sentAt), Reason: ev.Reason}
	case errors.Is(err, errLostCAS):
		ev := k.demoteLocked(EventLost, "lease taken over by another process (renewal lost its compare-and-swap)")
		ev.Err = err
		k.mu.Unlock()
		k.emit(ev)
		return StepResult{Role: RoleStandby, Transition: TransitionLost, Next: k.cfg.RenewInterval, Reason: ev.Reason, Err: err}
	case ctx.Err() != nil:
		k.mu.Unlock()
		return StepResult{Role: RoleLeader, Epoch: epoch, Reason: "stopping", Err: err}
	default:
		k.failures++
		failures := k.failures
		deadline := k.deadline
		k.mu.Unlock()
		ev := k.event(EventRenewFailed, epoch, fmt.Sprintf("renewal failed; leading until the fence deadline in %s", deadline.Sub(after)))
		ev.Failures, ev.Err = failures, err
		k.emit(ev)
		k.log.Warn("lease renewal failed", "epoch", epoch, "failures", failures, "error", err)
		return StepResult{Role: RoleLeader, Epoch: epoch, Next: min(k.untilNextRenewal(now), deadline.Sub(after)), Reason: ev.Reason, Err: err}
	}
}

// demoteLocked ends leadership (the fence fails from now on) and returns
// the event to report. k.mu held.
func (k *LeaseKeeper) demoteLocked(kind EventKind, reason string) Event {
	epoch := k.record.Epoch
	k.role, k.lostReason, k.failures = RoleStandby, reason, 0
	k.seen = false
	return k.event(kind, epoch, reason)
}

// setBlocked records why this standby does not contend ("" when it does),
// logging once per change of reason, not per poll.
func (k *LeaseKeeper) setBlocked(code, detail string) {
	k.mu.Lock()
	changed := k.blocked != code
	k.blocked, k.blockedWhy = code, detail
	k.mu.Unlock()
	switch {
	case !changed:
	case code == "":
		k.log.Info("no longer blocked: contending for the lease again")
	case code == BlockedResigned:
		k.log.Warn("not contending for the lease for now", "blocked", code, "reason", detail)
	default:
		k.log.Error("cannot contend for the lease", "blocked", code, "reason", detail)
	}
}

// Resign asks Run to end this replica's leadership for reason: the work's
// context ends, OnLose runs, the lease is released so another replica can
// take over at its next poll, and this replica does not contend for holdOff.
// It returns at once; a standby ignores it.
func (k *LeaseKeeper) Resign(reason string, holdOff time.Duration) {
	select {
	case k.resign <- resignation{reason: reason, holdOff: holdOff}:
	default: // one is pending already
	}
}

// Expire ends leadership if the self-fencing deadline has passed; Run calls
// it when the deadline timer fires. It reports whether leadership ended.
func (k *LeaseKeeper) Expire() bool {
	k.mu.Lock()
	if k.role != RoleLeader || k.clock.Now().Before(k.deadline) {
		k.mu.Unlock()
		return false
	}
	ev := k.demoteLocked(EventFenced, "self-fencing deadline passed without a successful renewal")
	k.mu.Unlock()
	k.emit(ev)
	return true
}

// Release ends leadership and writes the lease with an empty holder and the
// same epoch, so a standby takes over at its next poll instead of after a
// full ttl. It is a no-op on a standby that never led.
func (k *LeaseKeeper) Release(ctx context.Context) error {
	return k.release(ctx, "stopping", "released on graceful stop", true)
}

// release ends leadership as planned (EventLost, Graceful, for reason) and
// releases the lease (EventReleased, for released); departing marks the
// release as this replica's stop, so that the others count it gone at once.
func (k *LeaseKeeper) release(ctx context.Context, reason, released string, departing bool) error {
	k.mu.Lock()
	if k.version == "" {
		k.mu.Unlock()
		return nil
	}
	wasLeader := k.role == RoleLeader
	rec := k.record
	rec.Holder = ""
	if departing {
		rec.Departed = k.cfg.Holder
	}
	rec.Renewals++
	rec.RenewedAt = k.clock.Now().UTC()
	rec.ExpiresAt = rec.RenewedAt
	pre, epoch := ports.IfVersion(k.version), rec.Epoch
	var lost Event
	if wasLeader {
		lost = k.demoteLocked(EventLost, reason)
		lost.Graceful = true
	}
	k.version = ""
	k.leaseRec = rec
	k.mu.Unlock()
	if wasLeader {
		k.emit(lost)
	}
	res, err := k.req.put(ctx, rec.Encode(), pre, nil)
	if err != nil {
		k.log.Warn("could not release the lease; a standby takes over after ttl", "epoch", epoch, "error", err)
		return fmt.Errorf("release %s: %w", k.cas, err)
	}
	ev := k.event(EventReleased, epoch, released)
	ev.Attempts = res.attempts
	k.emit(ev)
	return nil
}

// Run drives the state machine until ctx ends: standby, acquire, OnAcquire,
// renew, OnLose, standby. Every OnAcquire is paired with exactly one OnLose.
// When ctx ends while leading, the lease keeps being renewed while OnLose
// drains the work (the fence stays valid), then the lease is released.
func (k *LeaseKeeper) Run(ctx context.Context, cb Callbacks) error {
	if cb.OnAcquire == nil || cb.OnLose == nil {
		return configErrorf("lease keeper callbacks OnAcquire and OnLose are required")
	}
	var (
		due  = k.clock.Now()
		lead leaderTerm
	)
	defer lead.end()
	watch := k.newLeaseWatch()
	defer func() {
		watch.stop()
		k.setWatching(false, "")
	}()
	for {
		k.syncWatch(ctx, watch)
		wk, err := k.wait(ctx, due, watch.ch)
		if err != nil {
			if lead.active {
				k.stopLeading(ctx, cb, &lead)
			}
			return nil
		}
		var res StepResult
		switch wk.kind {
		case wakeResign:
			next := k.resignNow(ctx, cb, &lead, wk.rsg) // drains first: read the clock after
			due = k.clock.Now().Add(next)
			continue
		case wakeChange:
			var acted bool
			if res, acted = k.onChange(ctx, watch, wk); !acted {
				continue // nothing new: the next look stays due when it was
			}
		case wakeTimer:
			res = k.Step(ctx)
			if res.Err != nil && res.Role == RoleStandby && res.Transition == TransitionNone && ctx.Err() == nil && k.Status().Blocked == "" {
				k.log.Warn("standby step failed; retrying at the next poll", "reason", res.Reason, "error", res.Err)
			}
		case wakeFence:
			if k.Expire() {
				res = StepResult{Role: RoleStandby, Transition: TransitionLost, Reason: "self-fencing deadline passed"}
			}
		}
		switch res.Transition {
		case TransitionAcquired:
			select {
			case <-k.resign: // a Resign from an earlier term
			default:
			}
			lctx := lead.begin(ctx, res.Epoch)
			cb.OnAcquire(lctx, Leadership{Epoch: res.Epoch, Holder: k.cfg.Holder, Instance: k.cfg.Instance})
		case TransitionLost:
			epoch := lead.end()
			cb.OnLose(Loss{Epoch: epoch, Reason: res.Reason})
		}
		due = k.clock.Now().Add(res.Next)
	}
}

// leaderTerm is Run's record of the leadership it handed to the callbacks.
type leaderTerm struct {
	active bool
	epoch  uint64
	cancel context.CancelFunc
}

// begin starts a term and returns the context handed to OnAcquire.
func (l *leaderTerm) begin(parent context.Context, epoch uint64) context.Context {
	ctx, cancel := context.WithCancel(parent)
	l.active, l.epoch, l.cancel = true, epoch, cancel
	return ctx
}

// end cancels the term's context and returns its epoch.
func (l *leaderTerm) end() uint64 {
	if l.cancel != nil {
		l.cancel()
	}
	epoch := l.epoch
	*l = leaderTerm{}
	return epoch
}

// resignNow carries out a Resign: the work stops (OnLose), the lease is
// released, and claims are held off. It returns when to step next.
func (k *LeaseKeeper) resignNow(ctx context.Context, cb Callbacks, lead *leaderTerm, r resignation) time.Duration {
	if !lead.active {
		return 0
	}
	epoch := lead.end()
	k.mu.Lock()
	k.holdUntil, k.holdWhy = k.clock.Now().Add(r.holdOff), fmt.Sprintf("resigned leadership (%s); contending again after %s", r.reason, r.holdOff)
	k.mu.Unlock()
	k.log.Info("resigning leadership so that another replica can take over: draining", "epoch", epoch, "reason", r.reason, "hold_off", r.holdOff)
	// The work drains (its last commits land) while the lease is renewed,
	// as on a graceful stop; then the lease is released.
	k.drainRenewing(ctx, cb, Loss{Epoch: epoch, Reason: r.reason})
	if err := k.release(context.WithoutCancel(ctx), "resigned: "+r.reason, "released after resigning ("+r.reason+")", false); err != nil {
		k.log.Warn("release after resigning failed; another replica takes over after ttl", "error", err)
	}
	return k.cfg.RenewInterval
}

// wakeKind is what ended a wait.
type wakeKind int

const (
	wakeTimer  wakeKind = iota // the next step is due
	wakeFence                  // a leader's fence deadline passed
	wakeResign                 // a Resign arrived (rsg)
	wakeChange                 // the lease watch reported (change, or closed)
)

// keeperWake is what ended a wait.
type keeperWake struct {
	kind   wakeKind
	rsg    resignation
	change ports.Change
	closed bool // the watch's channel closed
}

// wait waits until due on the clock. On a leader it also wakes at the fence
// deadline and on a Resign; on a standby with a watch, on the watch's next
// report. It returns ctx.Err() when ctx ends.
func (k *LeaseKeeper) wait(ctx context.Context, due time.Time, changes <-chan ports.Change) (keeperWake, error) {
	if err := ctx.Err(); err != nil {
		return keeperWake{}, err
	}
	st := k.Status()
	t := k.clock.NewTimer(due.Sub(k.clock.Now()))
	defer t.Stop()
	var fence <-chan time.Time
	var resign <-chan resignation
	if st.Role == RoleLeader {
		ft := k.clock.NewTimer(st.FenceDeadline.Sub(k.clock.Now()))
		defer ft.Stop()
		fence, resign, changes = ft.C(), k.resign, nil
	}
	select {
	case <-ctx.Done():
		return keeperWake{}, ctx.Err()
	case <-t.C():
		return keeperWake{kind: wakeTimer}, nil
	case <-fence:
		return keeperWake{kind: wakeFence}, nil
	case r := <-resign:
		return keeperWake{kind: wakeResign, rsg: r}, nil
	case c, ok := <-changes:
		return keeperWake{kind: wakeChange, change: c, closed: !ok}, nil
	}
}

// stopLeading is the graceful stop: the work drains in OnLose while the
// lease is still renewed, then the lease is released.
func (k *LeaseKeeper) stopLeading(ctx context.Context, cb Callbacks, lead *leaderTerm) {
	epoch := lead.end()
	k.drainRenewing(ctx, cb, Loss{Epoch: epoch, Reason: "stopping", Graceful: true})
	if err := k.Release(context.WithoutCancel(ctx)); err != nil {
		k.log.Warn("release failed", "error", err)
	}
}

// drainRenewing runs OnLose (the work drains and commits) while it keeps
// renewing the lease, so the fence stays valid for the final commits.
func (k *LeaseKeeper) drainRenewing(ctx context.Context, cb Callbacks, loss Loss) {
	bg := context.WithoutCancel(ctx)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		cb.OnLose(loss)
	}()
	next := k.untilNextRenewal(k.Status().LastRenewal)
	for {
		t := k.clock.NewTimer(next)
		select {
		case <-drained:
			t.Stop()
			return
		case <-t.C():
			if k.Status().Role != RoleLeader {
				next = time.Hour
				continue
			}
			next = k.Step(bg).Next
			if next <= 0 {
				next = k.cfg.RenewInterval
			}
		}
	}
}

package domain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"
	"unicode/utf8"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// FenceEpochKey is the reserved checkpoint key holding the epoch of the
// leader that last claimed the document (a decimal string).
const FenceEpochKey = "__fence_epoch__"

// OrgKey is the reserved checkpoint key naming the org whose positions the
// document holds, with orgs configured: a claim by another org's shard is
// refused (ErrWrongOrg), so positions never pass from one org to another.
const OrgKey = "__org__"

// Reserved reports whether key is one of the document's reserved keys.
func Reserved(key string) bool { return key == FenceEpochKey || key == OrgKey }

// CommitterConfig configures a CheckpointCommitter.
type CommitterConfig struct {
	// Fence is called before every write attempt; a non-nil error refuses
	// the write (ErrFenced). The LeaseKeeper's CheckFence, or nil for a single
	// instance (noop coordinator).
	Fence func() error
	// RequestTimeout bounds each request (0: none beyond the adapter's own).
	RequestTimeout time.Duration
	// Retry bounds retries of transient failures (zero fields take defaults).
	Retry RetryPolicy
	// Observer receives commit events (nil discards them).
	Observer Observer
	// Logger receives diagnostic logs (nil discards them).
	Logger *slog.Logger
	// Org, when set, is the org the document belongs to: Claim stamps it
	// (OrgKey) and refuses a document stamped with another.
	Org string
	// Older, with Org, is where the org's positions written by the older
	// implementation are: the first claim of a document no shard has
	// claimed adopts them (AdoptOlderLayout). Nil: nothing to adopt.
	Older *OlderLayout
}

// CheckpointCommitter reads and writes the checkpoint document: one flat JSON
// object of string to string, shared by every replica, written only by the
// leader and fenced so a stale leader can never move it.
//
// Every write is a compare-and-swap against the cached Version, checks the
// fence first, and is stamped with the claimed epoch. It is safe for
// concurrent use; operations are serialized.
type CheckpointCommitter struct {
	cas   ports.ObjectCAS
	clock ports.Clock
	fence func() error
	req   requester
	obs   Observer
	log   *slog.Logger
	org   string
	older *OlderLayout

	sem     chan struct{} // a one-slot lock that a context can abandon
	loaded  bool
	doc     map[string]string
	version ports.Version // "" while the object is absent
	epoch   uint64        // claimed epoch; 0 = never claimed
}

// NewCheckpointCommitter validates cfg and returns a committer for the
// document in cas.
func NewCheckpointCommitter(cas ports.ObjectCAS, clock ports.Clock, cfg CommitterConfig) (*CheckpointCommitter, error) {
	if cas == nil || clock == nil {
		return nil, configErrorf("checkpoint committer needs an object store and a clock")
	}
	if cfg.RequestTimeout < 0 {
		return nil, configErrorf("checkpoint request timeout must be >= 0, got %s", cfg.RequestTimeout)
	}
	policy := cfg.Retry.withDefaults()
	if err := policy.validate(); err != nil {
		return nil, err
	}
	c := &CheckpointCommitter{
		cas:   cas,
		clock: clock,
		fence: cfg.Fence,
		req:   requester{cas: cas, clock: clock, policy: policy, timeout: cfg.RequestTimeout},
		obs:   cfg.Observer,
		log:   cfg.Logger,
		org:   cfg.Org,
		older: cfg.Older,
		sem:   make(chan struct{}, 1),
	}
	if c.fence == nil {
		c.fence = func() error { return nil }
	}
	if c.obs == nil {
		c.obs = nopObserver{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.log = c.log.With("checkpoint", cas.String())
	return c, nil
}

// String names the checkpoint object.
func (c *CheckpointCommitter) String() string { return c.cas.String() }

func (c *CheckpointCommitter) lock(ctx context.Context) error {
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *CheckpointCommitter) unlock() { <-c.sem }

// Load returns a copy of the document, reading it on first use (or after
// Reset). An absent object is an empty document.
func (c *CheckpointCommitter) Load(ctx context.Context) (map[string]string, error) {
	if err := c.lock(ctx); err != nil {
		return nil, err
	}
	defer c.unlock()
	if err := c.ensureLoaded(ctx); err != nil {
		return nil, err
	}
	return maps.Clone(c.doc), nil
}

// Get returns one key's value.
func (c *CheckpointCommitter) Get(ctx context.Context, key string) (string, bool, error) {
	doc, err := c.Load(ctx)
	if err != nil {
		return "", false, err
	}
	v, ok := doc[key]
	return v, ok, nil
}

// Version returns the cached Version ("" when absent or not loaded).
func (c *CheckpointCommitter) Version() ports.Version {
	c.sem <- struct{}{}
	defer c.unlock()
	return c.version
}

// Reset drops the cached document and Version: the next operation reads
// fresh. The claimed epoch is kept. Call it on demotion and after a conflict.
func (c *CheckpointCommitter) Reset() {
	c.sem <- struct{}{}
	defer c.unlock()
	c.loaded, c.doc, c.version = false, nil, ""
	c.req.unknown = nil // the next write is against a fresh read
}

// StoredEpoch reads the document fresh (bypassing the cache) and returns its
// stored epoch, 0 when absent. The LeaseKeeper uses it as its epoch floor.
func (c *CheckpointCommitter) StoredEpoch(ctx context.Context) (uint64, error) {
	obj, err := c.req.get(ctx)
	if errors.Is(err, ports.ErrNotFound) {
		return 0, nil
	}
	if errors.Is(err, ports.ErrTooLarge) {
		return 0, c.tooLarge(err)
	}
	if err != nil {
		return 0, fmt.Errorf("read checkpoint epoch from %s: %w", c.cas, err)
	}
	doc, err := c.decode(obj.Data)
	if err != nil {
		return 0, err
	}
	return storedEpoch(doc), nil
}

// storedEpoch returns the document's epoch; decode has validated it.
func storedEpoch(doc map[string]string) uint64 {
	n, _ := parseEpoch(doc[FenceEpochKey])
	return n
}

// ensureLoaded reads the document if it is not cached. c.sem held.
func (c *CheckpointCommitter) ensureLoaded(ctx context.Context) error {
	if c.loaded {
		return c.checkEpoch()
	}
	obj, err := c.req.get(ctx)
	switch {
	case errors.Is(err, ports.ErrNotFound):
		c.loaded, c.doc, c.version = true, map[string]string{}, ""
	case errors.Is(err, ports.ErrTooLarge):
		return c.tooLarge(err)
	case err != nil:
		return fmt.Errorf("load checkpoints from %s: %w", c.cas, err)
	default:
		doc, derr := c.decode(obj.Data)
		if derr != nil {
			return derr
		}
		c.loaded, c.doc, c.version = true, doc, obj.Version
	}
	return c.checkEpoch()
}

// tooLarge reports a document over the store's size cap as corrupt.
func (c *CheckpointCommitter) tooLarge(err error) error {
	return &CorruptError{Object: c.cas.String(), Problem: err.Error()}
}

// checkEpoch fails when the document carries a newer epoch than ours.
func (c *CheckpointCommitter) checkEpoch() error {
	if stored := storedEpoch(c.doc); c.epoch != 0 && stored > c.epoch {
		return c.epochFenced(stored)
	}
	return nil
}

func (c *CheckpointCommitter) epochFenced(stored uint64) error {
	return &FenceError{Holder: "epoch " + formatEpoch(c.epoch), Lease: c.cas.String(),
		Reason: fmt.Sprintf("the checkpoint document carries epoch %d, newer than ours (%d)", stored, c.epoch)}
}

// decode parses a checkpoint document: a JSON object whose values are all
// strings, with a decimal __fence_epoch__ if present.
func (c *CheckpointCommitter) decode(data []byte) (map[string]string, error) {
	return decodeDocument(c.cas.String(), data)
}

// decodeDocument parses the checkpoint document named name.
func decodeDocument(name string, data []byte) (map[string]string, error) {
	corrupt := func(problem string) error { return &CorruptError{Object: name, Problem: problem} }
	if !utf8.Valid(data) {
		return nil, corrupt("not valid UTF-8")
	}
	var raw any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, corrupt(fmt.Sprintf("not valid JSON: %v", err))
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return nil, corrupt(fmt.Sprintf("the document is a JSON %s, not an object", jsonKind(raw)))
	}
	doc := make(map[string]string, len(obj))
	for k, v := range obj {
		s, ok := v.(string)
		if !ok {
			return nil, corrupt(fmt.Sprintf("the value of %q is a JSON %s, not a string", k, jsonKind(v)))
		}
		doc[k] = s
	}
	if e, ok := doc[FenceEpochKey]; ok {
		if _, err := parseEpoch(e); err != nil {
			return nil, corrupt(fmt.Sprintf("%s: %v", FenceEpochKey, err))
		}
	}
	return doc, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	default:
		return "object"
	}
}

// CommitMany merges kv into the document and writes it in one
// compare-and-swap. It writes nothing when kv changes nothing.
//
// The fence is checked before anything else and before every attempt: a
// failing fence returns ErrFenced with nothing written. A lost CAS returns
// ErrConflict (a *ConflictError); a retry whose precondition fails because
// its own earlier attempt landed counts as success (verify-on-retry).
func (c *CheckpointCommitter) CommitMany(ctx context.Context, kv map[string]string) error {
	if _, ok := kv[FenceEpochKey]; ok {
		return fmt.Errorf("commit to %s: %q is reserved for the leader epoch", c.cas, FenceEpochKey)
	}
	return c.update(ctx, "commit", func(doc map[string]string) bool {
		changed := false
		for k, v := range kv {
			if old, ok := doc[k]; !ok || old != v {
				doc[k] = v
				changed = true
			}
		}
		return changed
	})
}

// Commit is CommitMany of one key.
func (c *CheckpointCommitter) Commit(ctx context.Context, key, value string) error {
	return c.CommitMany(ctx, map[string]string{key: value})
}

// Delete removes key from the document (a conditional write of the document
// without it). A missing key writes nothing.
func (c *CheckpointCommitter) Delete(ctx context.Context, key string) error {
	if key == FenceEpochKey {
		return fmt.Errorf("delete from %s: %q is reserved for the leader epoch", c.cas, FenceEpochKey)
	}
	return c.update(ctx, "delete", func(doc map[string]string) bool {
		if _, ok := doc[key]; !ok {
			return false
		}
		delete(doc, key)
		return true
	})
}

// Claim stamps the document with epoch on acquiring leadership: it reads the
// document fresh and writes it with __fence_epoch__ = epoch. The write
// changes the Version, so a previous leader's delayed write fails its CAS;
// every later commit carries the same epoch. A document whose epoch is
// already above epoch returns ErrFenced.
func (c *CheckpointCommitter) Claim(ctx context.Context, epoch uint64) error {
	if epoch == 0 || epoch > MaxEpoch {
		return fmt.Errorf("claim %s: epoch %d is outside 1..%d", c.cas, epoch, MaxEpoch)
	}
	if err := c.lock(ctx); err != nil {
		return err
	}
	c.loaded, c.doc, c.version = false, nil, ""
	c.epoch = epoch
	c.unlock()
	older, err := c.checkOrg(ctx)
	if err != nil {
		return err
	}
	var did OlderAdoption
	err = c.update(ctx, "claim", func(doc map[string]string) bool {
		changed := doc[FenceEpochKey] != formatEpoch(epoch)
		c.adoptInto(doc, older, &did)
		return c.stampOrg(doc) || changed
	})
	if err == nil {
		c.logAdoption(did)
	}
	return err
}

// Adopt is Claim's org check and stamp for a single instance, which claims
// no epoch: it reads the document afresh, refuses one stamped with another
// org (ErrWrongOrg) and stamps its own. Without an org it does nothing.
func (c *CheckpointCommitter) Adopt(ctx context.Context) error {
	if c.org == "" {
		return nil
	}
	if err := c.lock(ctx); err != nil {
		return err
	}
	c.loaded, c.doc, c.version = false, nil, ""
	c.unlock()
	older, err := c.checkOrg(ctx)
	if err != nil {
		return err
	}
	var did OlderAdoption
	err = c.update(ctx, "adopt", func(doc map[string]string) bool {
		c.adoptInto(doc, older, &did)
		return c.stampOrg(doc)
	})
	if err == nil {
		c.logAdoption(did)
	}
	return err
}

// checkOrg refuses a document stamped with another org. It returns the
// older-layout document to adopt the org's positions from, when the
// document was never claimed by a shard (see OlderLayout).
func (c *CheckpointCommitter) checkOrg(ctx context.Context) (map[string]string, error) {
	if c.org == "" {
		return nil, nil
	}
	doc, err := c.Load(ctx)
	if err != nil {
		return nil, err
	}
	if owner, ok := doc[OrgKey]; ok && owner != c.org {
		return nil, &WrongOrgError{Document: c.cas.String(), Org: c.org, Owner: owner}
	}
	return c.olderSource(ctx, doc)
}

// stampOrg stamps the committer's org on doc; it reports a change.
func (c *CheckpointCommitter) stampOrg(doc map[string]string) bool {
	if c.org == "" || doc[OrgKey] == c.org {
		return false
	}
	doc[OrgKey] = c.org
	return true
}

// update is the one write path: fence, load, mutate a copy, stamp, CAS.
func (c *CheckpointCommitter) update(ctx context.Context, op string, mutate func(map[string]string) bool) error {
	start := c.clock.Now()
	if err := c.checkFence(op, start); err != nil {
		return err
	}
	if err := c.lock(ctx); err != nil {
		return err
	}
	defer c.unlock()
	if err := c.ensureLoaded(ctx); err != nil {
		if errors.Is(err, ErrFenced) {
			c.report(EventCommitFenced, op, start, 0, err)
		}
		return err
	}
	build := func(base map[string]string) (map[string]string, []byte, bool, error) {
		next := maps.Clone(base)
		changed := mutate(next)
		if c.epoch != 0 && next[FenceEpochKey] != formatEpoch(c.epoch) {
			next[FenceEpochKey] = formatEpoch(c.epoch)
			changed = true
		}
		data, err := json.Marshal(next)
		if err != nil {
			return nil, nil, false, fmt.Errorf("%s to %s: encode: %w", op, c.cas, err)
		}
		return next, data, changed, nil
	}
	next, data, changed, err := build(c.doc)
	if err != nil || !changed {
		return err
	}
	pre := ports.CreateOnly()
	if c.version != "" {
		pre = ports.IfVersion(c.version)
	}
	// An earlier write whose outcome was unknown landed: this write goes on
	// top of it (the stored document, which is exactly what that write sent).
	rebase := func(stored ports.Object) ([]byte, error) {
		doc, err := c.decode(stored.Data)
		if err != nil {
			return nil, err
		}
		n, d, _, err := build(doc)
		next = n
		return d, err
	}
	res, err := c.req.putWith(ctx, data, pre, putOptions{before: func() error { return c.checkFence(op, time.Time{}) }, rebase: rebase})
	switch {
	case err == nil:
		c.doc, c.version = next, res.version
		if res.recovered || res.adopted {
			why := "checkpoint write landed though its acknowledgement was lost; adopted the stored version"
			if res.adopted {
				why = "an earlier checkpoint write whose outcome was unknown had landed; adopted the stored version and wrote on top of it"
			}
			c.log.Warn(why, "op", op, "attempts", res.attempts)
			reason := op
			if res.adopted {
				reason = op + ": an earlier write whose outcome was unknown had landed"
			}
			c.report(EventRecoveredLostAck, reason, start, res.attempts, nil)
		}
		kind := EventCommitted
		if op == "claim" {
			kind = EventClaimed
		}
		c.report(kind, op, start, res.attempts, nil)
		return nil
	case errors.Is(err, ErrFenced):
		c.report(EventCommitFenced, op, start, res.attempts, err)
		return err
	case errors.Is(err, errLostCAS):
		cerr := &ConflictError{Object: c.cas.String(), Op: op, Err: err}
		c.report(EventConflict, op, start, res.attempts, cerr)
		return cerr
	default:
		c.report(EventCommitFailed, op, start, res.attempts, err)
		return fmt.Errorf("%s to %s: %w", op, c.cas, err)
	}
}

// checkFence runs the fence; start non-zero reports a refusal.
func (c *CheckpointCommitter) checkFence(op string, start time.Time) error {
	if err := c.fence(); err != nil {
		if !errors.Is(err, ErrFenced) {
			err = fmt.Errorf("%w: %w", ErrFenced, err)
		}
		if !start.IsZero() {
			c.report(EventCommitFenced, op, start, 0, err)
		}
		return fmt.Errorf("%s to %s: %w", op, c.cas, err)
	}
	return nil
}

func (c *CheckpointCommitter) report(kind EventKind, op string, start time.Time, attempts int, err error) {
	now := c.clock.Now()
	c.obs.Observe(Event{Kind: kind, At: now, Epoch: c.epoch, Backend: c.cas.String(), Reason: op,
		Attempts: attempts, Duration: now.Sub(start), Err: err})
}

// ForceEpoch is the operator's repair of the reserved epoch: it writes
// __fence_epoch__ = epoch (0 removes it) whatever the stored value, in one
// compare-and-swap, after the fence. Only the state command uses it, with
// the daemon stopped: an epoch above the lease's fences every leader out.
func (c *CheckpointCommitter) ForceEpoch(ctx context.Context, epoch uint64) error {
	if epoch > MaxEpoch {
		return fmt.Errorf("epoch repair of %s: %d is above the maximum epoch %d; choose the lease's epoch or a little above it", c.cas, epoch, MaxEpoch)
	}
	if err := c.lock(ctx); err != nil {
		return err
	}
	c.epoch = 0 // the operator overrides; no epoch check on the reload
	c.loaded, c.doc, c.version = false, nil, ""
	c.unlock()
	return c.update(ctx, "epoch repair", func(doc map[string]string) bool {
		if epoch == 0 {
			_, had := doc[FenceEpochKey]
			delete(doc, FenceEpochKey)
			return had
		}
		if doc[FenceEpochKey] == formatEpoch(epoch) {
			return false
		}
		doc[FenceEpochKey] = formatEpoch(epoch)
		return true
	})
}

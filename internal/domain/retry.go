package domain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// Retry defaults.
const (
	DefaultMaxAttempts   = 4
	DefaultBaseDelay     = 200 * time.Millisecond
	DefaultMaxDelay      = 2 * time.Second
	DefaultMaxRetryAfter = 10 * time.Second
)

// RetryPolicy bounds how the core retries a request that failed
// transiently. Only errors for which ports.IsTransient is true are retried;
// a precondition failure, a permission error or the caller's cancellation
// never is.
type RetryPolicy struct {
	// MaxAttempts is the total number of requests per call, first included
	// (default 4).
	MaxAttempts int
	// BaseDelay is the backoff before the first retry; it doubles per retry
	// (default 200ms).
	BaseDelay time.Duration
	// MaxDelay caps the doubled backoff (default 2s).
	MaxDelay time.Duration
	// MaxRetryAfter caps a backend's Retry-After hint (default 10s).
	MaxRetryAfter time.Duration
	// Jitter returns a number in [0, 1) that spreads each backoff over
	// [d/2, d]. Nil uses math/rand/v2; the simulation passes a seeded source.
	Jitter func() float64
}

// withDefaults fills zero fields.
func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.MaxRetryAfter == 0 {
		p.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if p.Jitter == nil {
		p.Jitter = rand.Float64
	}
	return p
}

func (p RetryPolicy) validate() error {
	switch {
	case p.MaxAttempts < 1:
		return configErrorf("retry max attempts must be at least 1, got %d", p.MaxAttempts)
	case p.BaseDelay < 0 || p.MaxDelay < p.BaseDelay:
		return configErrorf("retry delays must satisfy 0 <= base (%s) <= max (%s)", p.BaseDelay, p.MaxDelay)
	}
	return nil
}

// backoff returns the wait before retry number n (n=1 is the first retry),
// honouring a Retry-After hint carried by err.
func (p RetryPolicy) backoff(n int, err error) time.Duration {
	d := p.BaseDelay
	for i := 1; i < n && d < p.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, p.MaxDelay)
	d = d/2 + time.Duration(p.Jitter()*float64(d/2))
	if hint, ok := ports.RetryAfter(err); ok {
		d = max(d, min(hint, p.MaxRetryAfter))
	}
	return d
}

// requester issues ObjectCAS requests with bounded, jittered retries of
// transient failures, a per-attempt timeout on the injected clock, and
// verify-on-retry for conditional writes. It is the one place in the core
// that retries; lease writes, checkpoint commits, claims and deletes all go
// through it.
//
// Verify-on-retry spans calls: when a call gives up with an attempt's
// outcome unknown (it may have landed), the requester remembers the bytes
// it sent. The next call whose first attempt fails its precondition
// re-reads the object, exactly as a retry would: the remembered bytes mean
// that earlier write landed, so the call adopts the stored version and
// writes again; anything else is a genuine loss. A requester is not safe
// for concurrent use; its owner serializes calls.
type requester struct {
	cas     ports.ObjectCAS
	clock   ports.Clock
	policy  RetryPolicy
	timeout time.Duration // per attempt; 0 = none
	// unknown holds the bytes of the last write whose outcome is unknown
	// (nil when the last write's outcome is known).
	unknown []byte
}

// writeResult describes a conditional write that landed.
type writeResult struct {
	version ports.Version
	// sentAt is the clock reading just before the call's first attempt.
	sentAt time.Time
	// attempts is how many requests were sent.
	attempts int
	// recovered is true when a retry failed its precondition but re-reading
	// showed an earlier attempt of this call had landed.
	recovered bool
	// adopted is true when the first attempt failed its precondition because
	// an earlier call's write, whose outcome was unknown, had landed: the
	// write was rebased on it and sent again.
	adopted bool
}

// errLostCAS marks a conditional write or delete whose precondition did not
// hold for a reason other than this process's own earlier write.
var errLostCAS = errors.New("lost compare-and-swap")

// lostCAS reports whether err means the precondition did not hold: the
// store's ErrPreconditionFailed, or ErrNotFound for an if-version request
// (S3 answers If-Match on an absent key with 404).
func lostCAS(err error, pre ports.Precondition) bool {
	if errors.Is(err, ports.ErrPreconditionFailed) {
		return true
	}
	_, ifVersion := pre.Version()
	return ifVersion && errors.Is(err, ports.ErrNotFound)
}

// putOptions are put's hooks.
type putOptions struct {
	// before, if non-nil, runs before every attempt and aborts the call with
	// its error (the checkpoint fence).
	before func() error
	// rebase, if non-nil, rebuilds the bytes to write on top of a stored
	// object that an earlier call of this requester wrote (nil keeps data).
	rebase func(stored ports.Object) ([]byte, error)
}

// put writes data under pre; see putWith.
func (r *requester) put(ctx context.Context, data []byte, pre ports.Precondition, before func() error) (writeResult, error) {
	return r.putWith(ctx, data, pre, putOptions{before: before})
}

// putWith writes data under pre.
//
// A precondition failure is a genuine loss unless a write of this process
// explains it, so it is verified by re-reading once (itself retried on
// transient errors), exactly as a retry would:
//   - an earlier attempt of this call may have landed without an
//     acknowledgement: identical bytes mean success with the fetched version
//     (recovered);
//   - an earlier call's write whose outcome was unknown may have landed:
//     its bytes stored mean putWith adopts the stored version, rebases data
//     on it and sends it again (adopted, at most once per call).
//
// Anything else returns an error wrapping errLostCAS and
// ports.ErrPreconditionFailed. A write that lands without a version (a
// store that returned none) is read back to learn it.
func (r *requester) putWith(ctx context.Context, data []byte, pre ports.Precondition, opts putOptions) (res writeResult, err error) {
	res = writeResult{sentAt: r.clock.Now()}
	// maybeLanded: an attempt of this call at the current bytes was sent and
	// its outcome is unknown.
	maybeLanded := false
	defer func() {
		switch {
		case err == nil && res.version == "":
			r.unknown = data // landed, but which version is ours is unknown
		case err == nil:
			r.unknown = nil
		case errors.Is(err, errLostCAS):
			// The stored object is not ours: whatever we wrote was
			// superseded, so nothing of ours is pending.
			r.unknown = nil
		case maybeLanded:
			r.unknown = data
		}
		// Otherwise (nothing of this call can have landed) an earlier
		// unknown write stays remembered.
	}()
	var lastErr error
	for attempt := 1; attempt <= r.policy.MaxAttempts; attempt++ {
		if attempt > 1 {
			if err := r.sleep(ctx, r.policy.backoff(attempt-1, lastErr)); err != nil {
				return res, err
			}
		}
		if opts.before != nil {
			if err := opts.before(); err != nil {
				return res, err
			}
		}
		res.attempts = attempt
		v, err := r.attempt(ctx, "put", func(ctx context.Context) (ports.Version, error) {
			return r.cas.Put(ctx, data, pre)
		})
		switch {
		case err == nil:
			return r.landed(ctx, res, data, v)
		case lostCAS(err, pre):
			adoptable := r.unknown != nil && !res.adopted
			if !maybeLanded && !adoptable {
				return res, fmt.Errorf("%w: %s on %s: %w", errLostCAS, pre, r.cas, err)
			}
			obj, gerr := r.get(ctx)
			switch {
			case gerr == nil && maybeLanded && bytes.Equal(obj.Data, data):
				res.version, res.recovered = obj.Version, true
				return res, nil
			case gerr == nil && adoptable && bytes.Equal(obj.Data, r.unknown):
				if opts.rebase != nil {
					rebased, rerr := opts.rebase(obj)
					if rerr != nil {
						return res, rerr
					}
					data = rebased
				}
				// None of this call's attempts landed: the stored bytes are
				// the earlier call's.
				pre, res.adopted, maybeLanded = ports.IfVersion(obj.Version), true, false
				lastErr = err
				continue
			}
			why := "the stored document differs from what this process wrote"
			if gerr != nil {
				why = fmt.Sprintf("re-reading to verify failed: %v", gerr)
			}
			return res, fmt.Errorf("%w: %s on %s failed on attempt %d and %s: %w", errLostCAS, pre, r.cas, attempt, why, err)
		case ctx.Err() != nil:
			maybeLanded = true
			return res, stopped(ctx, err)
		case !ports.IsTransient(err):
			return res, err
		}
		maybeLanded = true
		lastErr = err
	}
	return res, fmt.Errorf("put %s: giving up after %d attempts: %w", r.cas, r.policy.MaxAttempts, lastErr)
}

// landed completes a write the store acknowledged. A store that returned no
// version is read back: the stored bytes being ours give the version;
// otherwise the version stays unknown (empty) and the bytes are remembered,
// so the next write verifies instead of reporting a conflict.
func (r *requester) landed(ctx context.Context, res writeResult, data []byte, v ports.Version) (writeResult, error) {
	res.version = v
	if v != "" {
		return res, nil
	}
	if obj, err := r.get(ctx); err == nil && bytes.Equal(obj.Data, data) {
		res.version = obj.Version
	}
	return res, nil
}

// get reads the object, retrying transient failures. ErrNotFound is an
// answer, not a failure: it is returned at once.
func (r *requester) get(ctx context.Context) (ports.Object, error) {
	var lastErr error
	for attempt := 1; attempt <= r.policy.MaxAttempts; attempt++ {
		if attempt > 1 {
			if err := r.sleep(ctx, r.policy.backoff(attempt-1, lastErr)); err != nil {
				return ports.Object{}, err
			}
		}
		obj, err := r.getOnce(ctx)
		if err != nil && ctx.Err() != nil {
			return obj, stopped(ctx, err)
		}
		if err == nil || !ports.IsTransient(err) {
			return obj, err
		}
		lastErr = err
	}
	return ports.Object{}, fmt.Errorf("get %s: giving up after %d attempts: %w", r.cas, r.policy.MaxAttempts, lastErr)
}

// getOnce is a single read with the per-attempt timeout.
func (r *requester) getOnce(ctx context.Context) (ports.Object, error) {
	var obj ports.Object
	_, err := r.attempt(ctx, "get", func(ctx context.Context) (ports.Version, error) {
		var err error
		obj, err = r.cas.Get(ctx)
		return obj.Version, err
	})
	return obj, err
}

// attempt runs one request under the per-attempt timeout. A request cut off
// by that timeout (the caller's ctx still live) is reported as transient:
// its outcome is unknown.
func (r *requester) attempt(ctx context.Context, op string, call func(context.Context) (ports.Version, error)) (ports.Version, error) {
	if r.timeout <= 0 {
		return call(ctx)
	}
	actx, timedOut, cancel := withClockTimeout(ctx, r.clock, r.timeout)
	defer cancel()
	v, err := call(actx)
	if err != nil && timedOut() && ctx.Err() == nil {
		// %v, not %w: the cut is ours, and a wrapped context.Canceled would
		// read as the caller giving up.
		return v, ports.Transient(op, fmt.Errorf("%s: no answer within %s (%v)", r.cas, r.timeout, err)) //nolint:errorlint // see above
	}
	return v, err
}

// stopped reports a call abandoned because its context ended, keeping the
// last error for the message.
func stopped(ctx context.Context, err error) error {
	if errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w (last error: %v)", ctx.Err(), err) //nolint:errorlint // the cancellation is the cause; err is context
}

// sleep waits d on the clock or until ctx ends.
func (r *requester) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-r.clock.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// withClockTimeout derives a context that is cancelled when d has elapsed
// on clk (context.WithTimeout would use the system clock). timedOut reports
// whether the clock, not the parent, ended it.
func withClockTimeout(parent context.Context, clk ports.Clock, d time.Duration) (ctx context.Context, timedOut func() bool, cancel context.CancelFunc) {
	ctx, cancelCtx := context.WithCancel(parent)
	t := clk.NewTimer(d)
	fired := make(chan struct{})
	go func() {
		select {
		case <-t.C():
			close(fired)
			cancelCtx()
		case <-ctx.Done():
		}
	}()
	timedOut = func() bool {
		select {
		case <-fired:
			return true
		default:
			return false
		}
	}
	return ctx, timedOut, func() {
		t.Stop()
		cancelCtx()
	}
}

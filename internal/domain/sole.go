package domain

import (
	"context"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// SoleLeader is the coordinator of a single instance (coordinate.type noop):
// it leads from the start, never loses leadership until its context ends,
// and has no fence. Another process on the same state must be excluded by
// other means (the app takes a lifetime lock on a state file).
type SoleLeader struct {
	holder string
	clock  ports.Clock
	resign chan resignation
	mu     sync.Mutex
	role   Role
	why    string // while resigned: why
}

// NewSoleLeader returns a coordinator for one instance named holder.
func NewSoleLeader(holder string, clock ports.Clock) *SoleLeader {
	return &SoleLeader{holder: holder, clock: clock, resign: make(chan resignation, 1)}
}

// Run calls OnAcquire, waits for ctx to end, then calls OnLose (graceful).
// A Resign ends the term (OnLose), waits its hold-off and starts a new one:
// there is nobody to hand over to, so the instance tries again itself.
func (s *SoleLeader) Run(ctx context.Context, cb Callbacks) error {
	if cb.OnAcquire == nil || cb.OnLose == nil {
		return configErrorf("callbacks OnAcquire and OnLose are required")
	}
	for {
		s.set(RoleLeader, "")
		lctx, cancel := context.WithCancel(ctx)
		cb.OnAcquire(lctx, Leadership{Holder: s.holder})
		select {
		case <-ctx.Done():
			cancel()
			cb.OnLose(Loss{Reason: "stopping", Graceful: true})
			s.set(RoleStandby, "")
			return nil
		case r := <-s.resign:
			cancel()
			cb.OnLose(Loss{Reason: r.reason})
			s.set(RoleStandby, "resigned ("+r.reason+"); starting again after "+r.holdOff.String())
			select {
			case <-ctx.Done():
				s.set(RoleStandby, "")
				return nil
			case <-s.clock.After(r.holdOff):
			}
		}
	}
}

// Resign ends the current term; Run starts a new one after holdOff.
func (s *SoleLeader) Resign(reason string, holdOff time.Duration) {
	select {
	case s.resign <- resignation{reason: reason, holdOff: holdOff}:
	default:
	}
}

func (s *SoleLeader) set(r Role, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.role, s.why = r, why
}

// CheckFence always passes: a single instance has nobody to be fenced by.
func (s *SoleLeader) CheckFence() error { return nil }

// FenceDeadline is always open, with no deadline (the zero time).
func (s *SoleLeader) FenceDeadline() (time.Time, error) { return time.Time{}, nil }

// Status reports the role.
func (s *SoleLeader) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Role: s.role, Holder: s.holder, Decided: s.role == RoleLeader || s.why != "", Lease: "none (noop)", LeaseHolder: s.holder}
	if s.why != "" {
		st.Blocked, st.BlockedDetail = BlockedResigned, s.why
	}
	return st
}

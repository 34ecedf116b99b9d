package domain

import (
	"context"
	"sync"
)

// SoleLeader is the coordinator of a single instance (coordinate.type noop):
// it leads from the start, never loses leadership until its context ends,
// and has no fence. Another process on the same state must be excluded by
// other means (the app takes a lifetime lock on a state file).
type SoleLeader struct {
	holder string
	mu     sync.Mutex
	role   Role
}

// NewSoleLeader returns a coordinator for one instance named holder.
func NewSoleLeader(holder string) *SoleLeader { return &SoleLeader{holder: holder} }

// Run calls OnAcquire once, waits for ctx to end, then calls OnLose
// (graceful).
func (s *SoleLeader) Run(ctx context.Context, cb Callbacks) error {
	if cb.OnAcquire == nil || cb.OnLose == nil {
		return configErrorf("callbacks OnAcquire and OnLose are required")
	}
	s.set(RoleLeader)
	lctx, cancel := context.WithCancel(ctx)
	cb.OnAcquire(lctx, Leadership{Holder: s.holder})
	<-ctx.Done()
	cancel()
	cb.OnLose(Loss{Reason: "stopping", Graceful: true})
	s.set(RoleStandby)
	return nil
}

func (s *SoleLeader) set(r Role) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.role = r
}

// CheckFence always passes: a single instance has nobody to be fenced by.
func (s *SoleLeader) CheckFence() error { return nil }

// Status reports the role.
func (s *SoleLeader) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Status{Role: s.role, Holder: s.holder, Decided: s.role == RoleLeader, Lease: "none (noop)"}
}

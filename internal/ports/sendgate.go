package ports

import (
	"context"
	"errors"
	"fmt"
)

// ErrGateClosed marks a request a send gate stopped before it was sent: the
// leader that made it may no longer write (its lease fence closed). A sink
// must not retry it.
var ErrGateClosed = errors.New("send gate closed")

type sendGateKey struct{}

// WithSendGate returns ctx carrying gate. A sink calls SendGate just before
// each request it makes under ctx (each attempt of a retried push), and
// sends nothing when it fails: a leader frozen past its fence and resumed
// does not start another request. A request already being sent is the
// caller's to stop, by ending ctx.
func WithSendGate(ctx context.Context, gate func() error) context.Context {
	return context.WithValue(ctx, sendGateKey{}, gate)
}

// SendGate returns nil when ctx carries no gate or its gate is open, else
// an error wrapping ErrGateClosed and the gate's reason.
func SendGate(ctx context.Context) error {
	gate, _ := ctx.Value(sendGateKey{}).(func() error)
	if gate == nil {
		return nil
	}
	if err := gate(); err != nil {
		return fmt.Errorf("%w: %w", ErrGateClosed, err)
	}
	return nil
}

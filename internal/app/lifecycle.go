package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// ExitError carries a process exit code.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Signalled is the cause of a run's context ended by a signal.
type Signalled struct{ sig os.Signal }

func (s *Signalled) Error() string { return "received " + signalName(s.sig) }

// signalName is a signal's conventional name (SIGTERM, SIGINT).
func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case os.Interrupt:
		return "SIGINT"
	}
	return s.String()
}

// OnSignals returns a context that ends at the first SIGTERM or SIGINT,
// with a *signalled cause; a second signal exits at once. stop undoes it.
func OnSignals(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	returned := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			cancel(&Signalled{sig: s})
		case <-returned:
			return
		}
		select {
		case <-sigs:
			fmt.Fprintln(os.Stderr, "sf2loki: second signal, exiting without a graceful stop")
			os.Exit(1)
		case <-returned:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(returned)
		cancel(nil)
	}
}

// ExitCode is the code the process exits with after err.
func ExitCode(err error) int {
	var exit *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.Code
	}
	return 1
}

// watchStop logs, when ctx ends, why and what the stop does (a leader
// drains, bounded by service.shutdown_grace), and only then stops the work
// with ctx's cause: the line says what the replica was doing when the stop
// came, not what it became once the work saw the stop. The function it
// returns logs the exit: how long the stop took and the exit code.
func (d *Daemon) watchStop(ctx context.Context, stop context.CancelCauseFunc) (exited func(err error)) {
	var stoppedAt time.Time
	said := make(chan struct{})
	done := make(chan struct{})
	say := func() {
		stoppedAt = d.clock.Now()
		what := "stopping"
		if s := (*Signalled)(nil); errors.As(context.Cause(ctx), &s) {
			what = s.Error()
		}
		grace := d.cfg.Service.ShutdownGrace
		msg := fmt.Sprintf("%s: a standby, nothing to drain", what)
		if d.leadsAny() {
			msg = fmt.Sprintf("%s: draining (shutdown_grace %s)", what, grace)
		}
		d.log.Info(msg, "shutdown_grace", grace)
	}
	go func() {
		defer close(said)
		select {
		case <-ctx.Done():
			say()
			stop(context.Cause(ctx))
		case <-done:
		}
	}()
	return func(err error) {
		close(done)
		<-said
		if stoppedAt.IsZero() && ctx.Err() != nil {
			say()
		}
		code := ExitCode(err)
		level, msg := slog.LevelInfo, "stopped"
		args := []any{"exit_code", code}
		if !stoppedAt.IsZero() {
			took := d.clock.Now().Sub(stoppedAt).Round(time.Millisecond)
			msg = fmt.Sprintf("stopped after draining for %s", took)
			args = append(args, "drained_for", took)
		}
		if code != 0 {
			level = slog.LevelError
			args = append(args, "error", err)
		}
		d.log.Log(context.Background(), level, msg, args...)
	}
}

// leadsAny reports whether this replica leads a shard.
func (d *Daemon) leadsAny() bool {
	for _, s := range d.shards {
		if s.leading() {
			return true
		}
	}
	return false
}

package file_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/file"
	"github.com/sf2loki/sf2loki/internal/domain"
)

const (
	failoverTTL   = 4 * time.Second
	failoverRenew = time.Second
	slack         = 5 * time.Second
)

// keeperWorker runs a LeaseKeeper on the file in args[0] until SIGTERM
// (graceful: release) or SIGKILL, printing its transitions.
func keeperWorker(args []string) {
	s, err := file.New(file.Config{Path: args[0]})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	k, err := domain.NewLeaseKeeper(s, clock.New(), domain.LeaseConfig{Holder: args[1], TTL: failoverTTL, RenewInterval: failoverRenew})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fmt.Println("READY")
	_ = k.Run(ctx, domain.Callbacks{
		OnAcquire: func(_ context.Context, l domain.Leadership) { fmt.Println("ACQUIRED", l.Epoch) },
		OnLose:    func(l domain.Loss) { fmt.Println("LOST", l.Epoch, l.Graceful) },
	})
	fmt.Println("EXIT")
}

// proc is a keeper helper process and its transition lines.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
}

func startKeeper(t *testing.T, path, holder string) *proc {
	t.Helper()
	cmd := helperCmd(os.Args[0], "keeper", path, holder)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if l := p.next(t, 30*time.Second); l != "READY" {
		t.Fatalf("keeper %s: %q", holder, l)
	}
	return p
}

func (p *proc) next(t *testing.T, limit time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			return "<exited>"
		}
		return l
	case <-time.After(limit):
		return "<timeout>"
	}
}

// quiet asserts p prints nothing for d.
func (p *proc) quiet(t *testing.T, d time.Duration, why string) {
	t.Helper()
	select {
	case l := <-p.lines:
		t.Fatalf("%s, but it printed %q", why, l)
	case <-time.After(d):
	}
}

// TestTwoProcessFailover runs LeaseKeepers in separate OS processes on one
// shared file: one leads; SIGKILL hands over after the ttl; a graceful stop
// releases and hands over within one poll.
func TestTwoProcessFailover(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lease.json")
	a := startKeeper(t, path, "a")
	if l := a.next(t, failoverTTL+slack); l != "ACQUIRED 1" {
		t.Fatalf("a: %q, want ACQUIRED 1", l)
	}
	b := startKeeper(t, path, "b")
	b.quiet(t, 3*failoverRenew, "b must stand by while a renews")

	killed := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	l := b.next(t, failoverTTL+failoverRenew+slack)
	took := time.Since(killed)
	if l != "ACQUIRED 2" {
		t.Fatalf("b after a was killed: %q, want ACQUIRED 2", l)
	}
	if took < failoverTTL-failoverRenew {
		t.Fatalf("b took over %s after a died, before ttl-renew (%s)", took, failoverTTL-failoverRenew)
	}
	t.Logf("SIGKILL: b led %s after a died (ttl %s)", took.Round(time.Millisecond), failoverTTL)

	c := startKeeper(t, path, "c")
	// Half an interval off c's poll phase, so the release does not happen to
	// land just before a poll.
	c.quiet(t, 3*failoverRenew+failoverRenew/2, "c must stand by while b renews")
	stopped := time.Now()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	l = c.next(t, failoverRenew+slack)
	took = time.Since(stopped)
	if l != "ACQUIRED 3" {
		t.Fatalf("c after b stopped: %q, want ACQUIRED 3", l)
	}
	if took > failoverRenew+slack {
		t.Fatalf("c took %s after b's release", took)
	}
	if got := []string{b.next(t, slack), b.next(t, slack)}; strings.Join(got, ",") != "LOST 2 true,EXIT" {
		t.Fatalf("b's graceful stop: %q", got)
	}
	t.Logf("SIGTERM: c led %s after b released (renew %s)", took.Round(time.Millisecond), failoverRenew)
}

package file

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// InstanceLock is a lifetime lock: while one process holds it, any other
// process (or another InstanceLock in the same process) that asks for it is
// refused. It guards a state file used without a coordinator, where two
// daemons would overwrite each other's checkpoints. The kernel releases it
// when the process dies.
type InstanceLock struct {
	f    *os.File
	path string
}

// LockInstance takes the lifetime lock for the file at path (on the sidecar
// <path>.instance.lock) without waiting. When another process holds it, the
// error wraps ports.ErrAlreadyRunning and names the lock and the holder it
// recorded.
func LockInstance(path string, mode os.FileMode) (*InstanceLock, error) {
	if mode == 0 {
		mode = DefaultMode
	}
	lockPath := path + ".instance.lock"
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, mode)
	if err != nil {
		return nil, fmt.Errorf("open instance lock %s: %w", lockPath, err)
	}
	if err := tryLock(f); err != nil {
		defer f.Close()
		if errors.Is(err, errLockBusy) {
			holder, _ := os.ReadFile(lockPath)
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "unknown"
			}
			return nil, fmt.Errorf("%w: %s is locked by another sf2loki (%s) using the same state file %s; "+
				"stop it, give this instance its own state file, or configure a coordinator for high availability",
				ports.ErrAlreadyRunning, lockPath, who, path)
		}
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	host, _ := os.Hostname()
	_ = f.Truncate(0)
	_, _ = f.WriteAt(fmt.Appendf(nil, "pid %d on %s\n", os.Getpid(), host), 0)
	return &InstanceLock{f: f, path: lockPath}, nil
}

// Path returns the lock file's path.
func (l *InstanceLock) Path() string { return l.path }

// Release gives the lock up. It is safe to call more than once.
func (l *InstanceLock) Release() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Package file is the ports.ObjectCAS adapter for one file on a local or
// shared filesystem (NFSv4, EFS). It gives the file a real compare-and-swap:
// the Version is a hash of the content, and a write takes an exclusive
// open-file-description lock on a sidecar <path>.lock only for the
// compare-and-write, then replaces the file atomically (temp file, fsync,
// rename, fsync of the directory). Reads take no lock: renames are atomic.
//
// Imports: internal/ports and golang.org/x/sys/unix.
package file

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// Defaults.
const (
	DefaultMode        os.FileMode = 0o640
	DefaultLockTimeout             = 2 * time.Second
)

// Config names one file.
type Config struct {
	// Path is the file (required). Its directory is created if missing.
	Path string
	// Mode is the permission of the file and its lock sidecar, applied
	// regardless of the umask (default 0640).
	Mode os.FileMode
	// LockTimeout bounds the wait for the write lock; a timeout is
	// transient (default 2s).
	LockTimeout time.Duration
}

// Store is one file with compare-and-swap.
type Store struct {
	path        string
	lockPath    string
	mode        os.FileMode
	lockTimeout time.Duration
}

var _ ports.ObjectCAS = (*Store)(nil)

// New validates cfg and returns the store. A directory where the file
// should be is an error.
func New(cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("file: path is required")
	}
	abs, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("file: %w", err)
	}
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		return nil, fmt.Errorf("file://%s is a directory; point the path at a file inside it, e.g. %s", abs, filepath.Join(abs, "state.json"))
	}
	s := &Store{path: abs, lockPath: abs + ".lock", mode: cfg.Mode, lockTimeout: cfg.LockTimeout}
	if s.mode == 0 {
		s.mode = DefaultMode
	}
	if s.lockTimeout <= 0 {
		s.lockTimeout = DefaultLockTimeout
	}
	return s, nil
}

// String implements ports.ObjectCAS.
func (s *Store) String() string { return "file://" + s.path }

// Path returns the absolute path of the file.
func (s *Store) Path() string { return s.path }

func versionOf(data []byte) ports.Version {
	sum := sha256.Sum256(data)
	return ports.Version(hex.EncodeToString(sum[:]))
}

// Get implements ports.ObjectCAS.
func (s *Store) Get(ctx context.Context) (ports.Object, error) {
	if err := ctx.Err(); err != nil {
		return ports.Object{}, fmt.Errorf("get %s: %w", s, err)
	}
	data, err := os.ReadFile(s.path)
	if err != nil {
		return ports.Object{}, s.classify("get", err)
	}
	return ports.Object{Data: data, Version: versionOf(data)}, nil
}

// Put implements ports.ObjectCAS.
func (s *Store) Put(ctx context.Context, data []byte, pre ports.Precondition) (ports.Version, error) {
	if err := pre.Validate(false); err != nil {
		return "", err
	}
	var v ports.Version
	err := s.locked(ctx, "put", func() error {
		if err := s.check("put", pre); err != nil {
			return err
		}
		if err := s.replace(data); err != nil {
			return s.classify("put", err)
		}
		v = versionOf(data)
		return nil
	})
	return v, err
}

// Delete implements ports.ObjectCAS.
func (s *Store) Delete(ctx context.Context, pre ports.Precondition) error {
	if err := pre.Validate(true); err != nil {
		return err
	}
	return s.locked(ctx, "delete", func() error {
		if err := s.check("delete", pre); err != nil {
			return err
		}
		if err := os.Remove(s.path); err != nil {
			return s.classify("delete", err)
		}
		return s.classify("delete", syncDir(filepath.Dir(s.path)))
	})
}

// check compares the file with pre; the write lock is held.
func (s *Store) check(op string, pre ports.Precondition) error {
	cur, err := os.ReadFile(s.path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s.classify(op, err)
	}
	if pre.IsCreateOnly() {
		if exists {
			return fmt.Errorf("%s %s (create-only): %w", op, s, ports.ErrPreconditionFailed)
		}
		return nil
	}
	want, _ := pre.Version()
	if !exists {
		return fmt.Errorf("%s %s (%s): %w", op, s, pre, ports.ErrNotFound)
	}
	if got := versionOf(cur); got != want {
		return fmt.Errorf("%s %s (%s, stored %q): %w", op, s, pre, got, ports.ErrPreconditionFailed)
	}
	return nil
}

// replace writes data to a temp file in the same directory, fsyncs it,
// renames it over the file and fsyncs the directory.
func (s *Store) replace(data []byte) (err error) {
	dir := filepath.Dir(s.path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(s.path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(s.mode); err != nil {
		return err
	}
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), s.path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// locked runs f holding the exclusive write lock on the sidecar. The lock is
// an open-file-description lock: it excludes other processes (also over
// NFSv4) and other goroutines of this process alike, and the kernel drops
// it if the process dies.
func (s *Store) locked(ctx context.Context, op string, f func() error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", op, s, err)
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o750); err != nil {
		return s.classify(op, err)
	}
	lf, err := lockFile(ctx, s.lockPath, s.mode, s.lockTimeout)
	if err != nil {
		if errors.Is(err, errLockTimeout) {
			return ports.Transient(op, fmt.Errorf("%s: %w", s, err))
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", op, s, ctx.Err())
		}
		return s.classify(op, err)
	}
	defer lf.Close() // closing the descriptor releases the lock
	return f()
}

var errLockTimeout = errors.New("timed out waiting for the write lock")

// lockFile opens (creating with mode) path and takes an exclusive OFD lock,
// polling until timeout or ctx ends.
func lockFile(ctx context.Context, path string, mode os.FileMode, timeout time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, mode)
	if err != nil {
		return nil, err
	}
	_ = f.Chmod(mode)
	deadline := time.Now().Add(timeout)
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%w on %s after %s", errLockTimeout, path, timeout)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// classify translates an OS error into the ports' vocabulary.
func (s *Store) classify(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s: %w: %w", op, s, ports.ErrNotFound, err)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%s %s: the path is a directory; point it at a file: %w", op, s, err)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%s %s: %w: check the ownership and mode of the file and its directory: %w", op, s, ports.ErrPermissionDenied, err)
	case errors.Is(err, syscall.EIO), errors.Is(err, syscall.ESTALE), errors.Is(err, syscall.ETIMEDOUT),
		errors.Is(err, syscall.EINTR), errors.Is(err, syscall.EAGAIN):
		return ports.Transient(op, fmt.Errorf("%s: %w", s, err))
	}
	return fmt.Errorf("%s %s: %w", op, s, err)
}

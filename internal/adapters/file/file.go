// Package file is the ports.ObjectCAS adapter for one file on a local or
// shared filesystem (NFSv4, EFS). It gives the file a real compare-and-swap:
// the Version is a hash of the content, and a write takes an exclusive
// open-file-description lock on a sidecar <path>.lock only for the
// compare-and-write, then replaces the file atomically (temp file, fsync,
// rename, fsync of the directory). Reads take no lock: renames are atomic.
// The first write of a Store removes temp files that interrupted writes
// left behind (older than StaleTempAge). Documents are capped at MaxSize.
// The lock is an OFD lock on Linux and flock(2) on other Unix systems
// (macOS), where it holds between processes of one host only (tryLock).
//
// A Store is also a ports.Watcher: Watch pushes the file's states with
// inotify on its directory (the file is replaced by rename), re-reading the
// file as Get does on each event, so a standby sees a renewal or a release
// at once. inotify reports only this host's writes, so on NFS (EFS), SMB,
// FUSE and the other network and cluster filesystems, and outside Linux,
// the watch reports one Err and the standby polls every renew_interval, as
// it does without a watch.
//
// Imports: internal/ports, golang.org/x/sys/unix and
// github.com/fsnotify/fsnotify.
package file

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// Defaults.
const (
	DefaultMode        os.FileMode = 0o640
	DefaultLockTimeout             = 2 * time.Second
	// DefaultMaxSize is the cap on a document when Config.MaxSize is 0:
	// the checkpoint document's cap, far above any lease record.
	DefaultMaxSize int64 = 16 << 20
)

// StaleTempAge is how old a temp file left next to the document by an
// interrupted write (.<name>.tmp-*) must be before a write removes it. A
// write holds its temp file for milliseconds, under the write lock; the
// age guards filesystems that do not honour the lock.
const StaleTempAge = 10 * time.Minute

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
	// MaxSize caps the document: Get does not read a larger file (it
	// returns ports.ErrTooLarge) and Put refuses larger data (default
	// DefaultMaxSize).
	MaxSize int64
}

// Store is one file with compare-and-swap.
type Store struct {
	path        string
	lockPath    string
	mode        os.FileMode
	lockTimeout time.Duration
	maxSize     int64
	swept       atomic.Bool // stale temp files removed (by the first write)
	hooks       watchHooks  // tests' seams for Watch
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
	s := &Store{path: abs, lockPath: abs + ".lock", mode: cfg.Mode, lockTimeout: cfg.LockTimeout, maxSize: cfg.MaxSize}
	if s.maxSize <= 0 {
		s.maxSize = DefaultMaxSize
	}
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

// hashFile returns the version of the file's content, read as a stream.
func hashFile(path string) (ports.Version, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return ports.Version(hex.EncodeToString(h.Sum(nil))), nil
}

func versionOf(data []byte) ports.Version {
	sum := sha256.Sum256(data)
	return ports.Version(hex.EncodeToString(sum[:]))
}

// Get implements ports.ObjectCAS. A file over the size cap is not read
// into memory: its Version is hashed from the stream and the error wraps
// ports.ErrTooLarge.
func (s *Store) Get(ctx context.Context) (ports.Object, error) {
	if err := ctx.Err(); err != nil {
		return ports.Object{}, fmt.Errorf("get %s: %w", s, err)
	}
	f, err := os.Open(s.path)
	if err != nil {
		return ports.Object{}, s.classify("get", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, s.maxSize+1))
	if err != nil {
		return ports.Object{}, s.classify("get", err)
	}
	if int64(len(data)) <= s.maxSize {
		return ports.Object{Data: data, Version: versionOf(data)}, nil
	}
	// Hash the rest without holding it: the version must be the content's.
	h := sha256.New()
	h.Write(data)
	n, err := io.Copy(h, f)
	if err != nil {
		return ports.Object{}, s.classify("get", err)
	}
	v := ports.Version(hex.EncodeToString(h.Sum(nil)))
	return ports.Object{Version: v}, s.tooLarge(int64(len(data)) + n)
}

// tooLarge is the error for a document of size bytes over the cap.
func (s *Store) tooLarge(size int64) error { return ports.TooLarge(s.String(), size, s.maxSize) }

// Put implements ports.ObjectCAS.
func (s *Store) Put(ctx context.Context, data []byte, pre ports.Precondition) (ports.Version, error) {
	if err := pre.Validate(false); err != nil {
		return "", err
	}
	if int64(len(data)) > s.maxSize {
		return "", fmt.Errorf("put %s: %w: the document is %d bytes, the cap is %d; nothing was written", s, ports.ErrTooLarge, len(data), s.maxSize)
	}
	var v ports.Version
	err := s.locked(ctx, "put", func() error {
		s.sweep()
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

// sweep removes the temp files interrupted writes left next to the file
// (.<name>.tmp-*, e.g. after a kill -9 between create and rename) that are
// older than StaleTempAge, once per Store. The write lock is held, so no
// write that honours it is in progress. Failures are ignored: a leftover
// temp file costs only space.
func (s *Store) sweep() {
	if s.swept.Swap(true) {
		return
	}
	dir := filepath.Dir(s.path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := "." + filepath.Base(s.path) + ".tmp-"
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > StaleTempAge {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// check compares the file with pre; the write lock is held. The version is
// hashed from the stream: an oversized file is never held in memory.
func (s *Store) check(op string, pre ports.Precondition) error {
	cur, err := hashFile(s.path)
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
	if got := cur; got != want {
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
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) { // the wait found the lock held
			return fmt.Errorf("%s %s: %w: %w", op, s, errLockHeld, ctx.Err())
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

// errLockHeld is a wait for the write lock that the caller's deadline ended:
// another writer holds the lock across the whole wait. A write holds it for
// milliseconds, so that writer is paused (SIGSTOP, a frozen VM) or hung (a
// stalled NFS mount): it keeps the lock until it resumes or exits.
var errLockHeld = errors.New("still waiting for the write lock, which another writer holds (a paused or hung process keeps it until it resumes or exits)")

// errLockBusy is a lock another open file holds (tryLock).
var errLockBusy = errors.New("locked by another open file")

// lockFile opens (creating with mode) path and takes an exclusive lock (tryLock),
// polling until timeout or ctx ends.
func lockFile(ctx context.Context, path string, mode os.FileMode, timeout time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, mode)
	if err != nil {
		return nil, err
	}
	_ = f.Chmod(mode)
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		err := tryLock(f)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, errLockBusy) {
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
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%s %s: %w: read-only filesystem: mount the volume read-write, or point the path at a writable volume "+
			"(a read-only container root needs a writable volume mounted for it): %w", op, s, ports.ErrPermissionDenied, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s %s: %w: check the ownership and mode of the file and its directory: %w", op, s, ports.ErrPermissionDenied, err)
	case errors.Is(err, syscall.EIO), errors.Is(err, syscall.ESTALE), errors.Is(err, syscall.ETIMEDOUT),
		errors.Is(err, syscall.EINTR), errors.Is(err, syscall.EAGAIN):
		return ports.Transient(op, fmt.Errorf("%s: %w", s, err))
	}
	return fmt.Errorf("%s %s: %w", op, s, err)
}

//go:build linux

package file_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/sf2loki/sf2loki/internal/adapters/file"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// watchBound bounds every wait for a change: generous, for a busy machine.
const watchBound = 30 * time.Second

func TestWatchContract(t *testing.T) {
	porttest.RunWatcher(t, func(t *testing.T) porttest.WatchOpener {
		path := filepath.Join(t.TempDir(), "lease.json")
		return func(t *testing.T) interface {
			ports.ObjectCAS
			ports.Watcher
		} {
			return open(t, path)
		}
	})
}

// watchT watches s until the test ends, and waits for the watch to close
// then, so that no watch outlives its test's directory.
func watchT(t *testing.T, s *file.Store) (<-chan ports.Change, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ch := s.Watch(ctx)
	t.Cleanup(func() {
		cancel()
		for range ch {
			// Drain until closed.
		}
	})
	return ch, cancel
}

// nextChange returns the next change, Err or not, failing after watchBound.
func nextChange(t *testing.T, ch <-chan ports.Change) ports.Change {
	t.Helper()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatal("the watch closed while its context was live")
		}
		return c
	case <-time.After(watchBound):
		t.Fatalf("no change within %s", watchBound)
	}
	return ports.Change{}
}

// awaitState reads changes until want holds, skipping broken-watch changes.
func awaitState(t *testing.T, ch <-chan ports.Change, what string, want func(ports.Change) bool) {
	t.Helper()
	deadline := time.Now().Add(watchBound)
	for time.Now().Before(deadline) {
		c := nextChange(t, ch)
		if c.Err != nil {
			t.Logf("broken watch (tolerated): %v", c.Err)
			continue
		}
		if want(c) {
			return
		}
	}
	t.Fatalf("no change %s within %s", what, watchBound)
}

func at(v ports.Version) func(ports.Change) bool {
	return func(c ports.Change) bool { return c.Err == nil && !c.Absent && c.Object.Version == v }
}

func absent(c ports.Change) bool { return c.Err == nil && c.Absent }

func put(t *testing.T, s *file.Store, data string, pre ports.Precondition) ports.Version {
	t.Helper()
	v, err := s.Put(t.Context(), []byte(data), pre)
	if err != nil {
		t.Fatalf("put %q: %v", data, err)
	}
	return v
}

func TestWatchOnANetworkFilesystemReportsOneErrAndNothingMore(t *testing.T) {
	for _, tc := range []struct {
		magic uint32
		name  string
	}{{0x6969, "NFS"}, {0xFE534D42, "SMB2"}, {0x65735546, "FUSE"}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lease.json")
			s := open(t, path)
			file.SetFilesystemType(s, func(string) (uint32, error) { return tc.magic, nil })
			ch, cancel := watchT(t, s)
			c := nextChange(t, ch)
			if c.Err == nil || !errors.Is(c.Err, file.ErrNoNotifications) ||
				!strings.Contains(c.Err.Error(), "on "+tc.name) || !strings.Contains(c.Err.Error(), "polls every renew_interval") {
				t.Fatalf("first change on %s: %+v, want an Err wrapping ErrNoNotifications that names %s and says the standby polls", tc.name, c, tc.name)
			}
			// A watch on a local filesystem, to know when the writes could
			// have been reported.
			ref, _ := watchT(t, open(t, path))
			awaitState(t, ref, "absent at first (the reference watch)", absent)
			v := put(t, open(t, path), `{"n":1}`, ports.CreateOnly())
			v = put(t, s, `{"n":2}`, ports.IfVersion(v))
			awaitState(t, ref, "at the last write (the reference watch)", at(v))
			cancel()
			for c := range ch {
				t.Errorf("a change after the Err on %s: %+v", tc.name, c)
			}
		})
	}
}

func TestWatchOnALocalFilesystemIsTrusted(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "lease.json"))
	file.SetFilesystemType(s, func(string) (uint32, error) { return 0xEF53, nil }) // ext4
	ch, _ := watchT(t, s)
	if c := nextChange(t, ch); !absent(c) {
		t.Fatalf("first change on ext4: %+v, want Absent", c)
	}
}

func TestWatchRecoversWhenTheDirectoryIsRemovedAndRecreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "leases")
	path := filepath.Join(dir, "lease.json")
	s := open(t, path)
	v1 := put(t, s, `{"n":1}`, ports.CreateOnly())
	ch, _ := watchT(t, s)
	awaitState(t, ch, "at the first version", at(v1))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	awaitState(t, ch, "reporting the removal", absent)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	v2 := put(t, open(t, path), `{"n":2}`, ports.CreateOnly())
	awaitState(t, ch, "at the version written in the new directory", at(v2))
	v3 := put(t, s, `{"n":3}`, ports.IfVersion(v2))
	awaitState(t, ch, "at a later version", at(v3))
}

func TestWatchRetriesWhenInotifyCannotStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lease.json")
	s := open(t, path)
	v1 := put(t, s, `{"n":1}`, ports.CreateOnly())
	fails := 2
	file.SetNotifier(s, func() (*fsnotify.Watcher, error) {
		if fails > 0 { // only the watch's goroutine calls it
			fails--
			return nil, fmt.Errorf("inotify_init1: %w", syscall.EMFILE)
		}
		return fsnotify.NewWatcher()
	})
	start := time.Now()
	ch, _ := watchT(t, s)
	c := nextChange(t, ch)
	if c.Err == nil || !errors.Is(c.Err, syscall.EMFILE) || !errors.Is(c.Err, file.ErrNoNotifications) ||
		!strings.Contains(c.Err.Error(), "fs.inotify.max_user_instances") {
		t.Fatalf("first change when inotify cannot start: %+v, want an Err naming fs.inotify.max_user_instances", c)
	}
	awaitState(t, ch, "at the stored version once inotify starts", at(v1))
	// Two failures: the backoff doubled once.
	if waited := time.Since(start); waited < 3*file.WatchRetryMin {
		t.Errorf("recovered after %s, want at least the backoff %s", waited, 3*file.WatchRetryMin)
	}
	v2 := put(t, s, `{"n":2}`, ports.IfVersion(v1))
	awaitState(t, ch, "at a later write", at(v2))
}

func TestWatchReportsTheStateAgainAfterAnInotifyError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lease.json")
	s := open(t, path)
	v1 := put(t, s, `{"n":1}`, ports.CreateOnly())
	errs := make(chan error)
	file.SetNotifier(s, func() (*fsnotify.Watcher, error) {
		n, err := fsnotify.NewWatcher()
		if err == nil {
			n.Errors = errs // the watch reads the test's errors instead
		}
		return n, err
	})
	ch, _ := watchT(t, s)
	awaitState(t, ch, "at the first version", at(v1))
	errs <- fsnotify.ErrEventOverflow // returns once the watch took it
	// The Err may be coalesced away by the state that follows it; the state
	// must come.
	c := nextChange(t, ch)
	if c.Err != nil {
		if !errors.Is(c.Err, fsnotify.ErrEventOverflow) {
			t.Fatalf("after an overflow: %v, want an Err wrapping it", c.Err)
		}
		c = nextChange(t, ch)
	}
	if !at(v1)(c) {
		t.Fatalf("after an overflow: %+v, want the current state at %q", c, v1)
	}
	v2 := put(t, s, `{"n":2}`, ports.IfVersion(v1))
	awaitState(t, ch, "at a later write", at(v2))
}

func TestWatchSeesAForeignWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lease.json")
	ch, _ := watchT(t, open(t, path))
	awaitState(t, ch, "absent at first", absent)
	// Another handle, as another process on this host would write.
	other := open(t, path)
	v1 := put(t, other, `{"holder":"b"}`, ports.CreateOnly())
	awaitState(t, ch, "at the other handle's write", at(v1))
	// A write in place, not through a Store.
	if err := os.WriteFile(path, []byte(`{"holder":"c"}`), 0o640); err != nil {
		t.Fatal(err)
	}
	obj, err := other.Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	awaitState(t, ch, "at the write in place", at(obj.Version))
	if err := other.Delete(t.Context(), ports.IfVersion(obj.Version)); err != nil {
		t.Fatal(err)
	}
	awaitState(t, ch, "reporting the other handle's delete", absent)
}

func TestWatchNeverBlocksOnAReaderThatDoesNotRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lease.json")
	s := open(t, path)
	ch, _ := watchT(t, s)
	pre := ports.CreateOnly()
	var last ports.Version
	for i := range 200 {
		last = put(t, s, fmt.Sprintf(`{"n":%d}`, i), pre)
		pre = ports.IfVersion(last)
	}
	awaitState(t, ch, fmt.Sprintf("at the last of 200 versions, %q", last), at(last))
}

func TestWatchReportsADocumentOverTheCapAsGetDoes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lease.json")
	s, err := file.New(file.Config{Path: path, MaxSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"too":"large"}`), 0o640); err != nil {
		t.Fatal(err)
	}
	ch, _ := watchT(t, s)
	obj, getErr := s.Get(t.Context())
	if c := nextChange(t, ch); !errors.Is(c.Err, ports.ErrTooLarge) || c.Err.Error() != getErr.Error() || c.Object.Version != obj.Version {
		t.Fatalf("first change of a document over the cap: %+v, want Get's answer: version %q, %v", c, obj.Version, getErr)
	}
	if err := os.WriteFile(path, []byte(`{}`), 0o640); err != nil {
		t.Fatal(err)
	}
	awaitState(t, ch, "at the document under the cap", func(c ports.Change) bool {
		return c.Err == nil && string(c.Object.Data) == `{}`
	})
}

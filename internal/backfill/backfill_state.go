package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/file"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// backfillSuffix names the backfill state beside the checkpoint document:
// state.json → state.backfill.json.
const backfillSuffix = ".backfill.json"

// backfillName is the backfill state's name beside the checkpoint
// document's (a file path, an S3 key, a GCS object name).
func backfillName(p string) string { return strings.TrimSuffix(p, ".json") + backfillSuffix }

// backfillDoc is the backfill state document: the files done, by Id.
type backfillDoc struct {
	// Org names the org in the orgs form (for people reading the file).
	Org   string                  `json:"org,omitempty"`
	Files map[string]backfillDone `json:"files"`
	// Older are the positions of the older implementation's backfill, by
	// "<interval>:<event type>": every file of that type and interval
	// created before LastCreated, and those at it named in DoneIDs, count
	// as done (that backfill read each type oldest first up to there).
	Older map[string]olderBackfill `json:"older,omitempty"`
}

// olderBackfill is the value of a backfill:<interval>:<type> key of the
// older implementation's backfill state.
type olderBackfill struct {
	LastCreated string   `json:"last_created"`
	DoneIDs     []string `json:"done_ids"`
}

// olderBackfillPrefix starts the keys of the older implementation's
// backfill state: backfill:<interval>:<type>, with orgs
// backfill:org=<name>:<interval>:<type> (the first org also reading the
// unprefixed keys).
const olderBackfillPrefix = "backfill:"

// olderBackfillName is where the older implementation kept its backfill
// state: a local file beside state.file.path, <stem>-backfill<suffix>
// (whatever state.store), one for every org.
func olderBackfillName(p string) string {
	if p == "" {
		return ""
	}
	ext := filepath.Ext(p)
	return strings.TrimSuffix(p, ext) + "-backfill" + ext
}

// readOlderBackfill takes org's positions from data, the older
// implementation's backfill state (a flat JSON object of strings). ok is
// false when data is not in that layout (no backfill: key).
func readOlderBackfill(data []byte, org string, first bool) (map[string]olderBackfill, bool, error) {
	var flat map[string]json.RawMessage
	if json.Unmarshal(data, &flat) != nil {
		return nil, false, nil
	}
	older, found := map[string]olderBackfill{}, false
	prefixed := olderBackfillPrefix + domain.OlderOrgPrefix(org)
	take := func(rest string, raw json.RawMessage, override bool) error {
		var v string
		var c olderBackfill
		if json.Unmarshal(raw, &v) != nil || json.Unmarshal([]byte(v), &c) != nil {
			return fmt.Errorf("%s%s is not {\"last_created\": …, \"done_ids\": […]}", olderBackfillPrefix, rest)
		}
		if c.LastCreated == "" {
			return nil // no file done yet
		}
		if _, err := salesforce.ParseTime(c.LastCreated); err != nil {
			return fmt.Errorf("%s%s: last_created %q is not a timestamp", olderBackfillPrefix, rest, c.LastCreated)
		}
		if _, had := older[rest]; !had || override {
			older[rest] = c
		}
		return nil
	}
	for k, raw := range flat {
		if !strings.HasPrefix(k, olderBackfillPrefix) {
			continue
		}
		found = true
		var err error
		switch rest, isOrg := strings.CutPrefix(k, prefixed); {
		case org != "" && isOrg:
			err = take(rest, raw, true) // the prefixed key wins, as the older backfill read it first
		case org == "" || first:
			if rest := strings.TrimPrefix(k, olderBackfillPrefix); !strings.HasPrefix(rest, "org=") {
				err = take(rest, raw, false)
			}
		}
		if err != nil {
			return nil, true, err
		}
	}
	return older, found, nil
}

// backfillDone is one file whose rows Loki all accepted.
type backfillDone struct {
	// Created is the file's CreatedDate when it was read: a file listed with
	// another one (a Daily file regenerated in place) is read again.
	Created   string `json:"created"`
	EventType string `json:"event_type"`
	Interval  string `json:"interval"`
	LogDate   string `json:"log_date"`
	Rows      int64  `json:"rows"`
}

// backfillState is the backfill's own state: a document apart from the
// daemon's checkpoints, and the lock that keeps a second backfill off it.
type backfillState struct {
	store ports.ObjectCAS
	// lockName names the lock for messages; release gives it up.
	lockName string
	release  func()
	// lost is closed when an object-store lock is lost (lostErr says why).
	lost    <-chan struct{}
	lostErr func() error
	// olderPath is the older implementation's backfill state file, read
	// when this state holds nothing yet; olderFirst says the org is the
	// first listed (which also read the unprefixed keys).
	olderPath  string
	olderFirst bool
	// olderNote says what was taken from the older backfill state.
	olderNote string

	mu      sync.Mutex
	doc     backfillDoc
	version ports.Version // "" while the document does not exist
	dirty   bool
	flushMu sync.Mutex
}

// openBackfillState opens the backfill state of shard cfg (configured is
// the whole configuration): the file at statePath when set, else beside the
// checkpoint document in its store. It never opens the checkpoint
// document itself.
func openBackfillState(ctx context.Context, cfg, configured *config.Config, statePath string) (*backfillState, error) {
	s, err := openBackfillStore(ctx, cfg, configured, statePath)
	if err != nil {
		return nil, err
	}
	s.olderPath = olderBackfillName(configured.State.File.Path)
	s.olderFirst = len(configured.Orgs) == 0 || configured.Orgs[0].Name == cfg.ShardName
	return s, nil
}

// openBackfillStore opens the backfill state's document and takes its lock.
func openBackfillStore(ctx context.Context, cfg, configured *config.Config, statePath string) (*backfillState, error) {
	if statePath != "" {
		abs, err := filepath.Abs(statePath)
		if err != nil {
			return nil, &app.ExitError{Code: app.ExitInvalidConfig, Err: err}
		}
		for _, daemon := range daemonFiles(cfg) {
			if abs == daemon {
				return nil, &app.ExitError{Code: app.ExitInvalidConfig, Err: fmt.Errorf("--state %s is a file of the daemon (its checkpoint document or lease): give the backfill a file of its own", statePath)}
			}
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
			return nil, &app.ExitError{Code: 1, Err: err}
		}
		return openBackfillFile(abs)
	}
	switch cfg.State.Store {
	case config.StoreFile:
		if err := app.ShardDir(configured.State.File.Path, cfg.State.File.Path); err != nil {
			return nil, err
		}
		return openBackfillFile(backfillName(cfg.State.File.Path))
	case config.StoreS3:
		o := cfg.State.S3
		o.Key = backfillName(o.Key)
		store, err := app.NewS3(ctx, o, 0)
		if err != nil {
			return nil, &app.ExitError{Code: app.ExitInvalidConfig, Err: err}
		}
		o.Key += ".lock"
		lock, err := app.NewS3(ctx, o, app.LeaseMaxSize)
		if err != nil {
			return nil, &app.ExitError{Code: app.ExitInvalidConfig, Err: err}
		}
		return lockObject(ctx, store, lock)
	case config.StoreGCS:
		o := cfg.State.GCS
		o.ObjectName = backfillName(o.ObjectName)
		store, err := app.NewGCS(ctx, o, 0)
		if err != nil {
			return nil, &app.ExitError{Code: app.ExitInvalidConfig, Err: err}
		}
		o.ObjectName += ".lock"
		lock, err := app.NewGCS(ctx, o, app.LeaseMaxSize)
		if err != nil {
			return nil, &app.ExitError{Code: app.ExitInvalidConfig, Err: err}
		}
		return lockObject(ctx, store, lock)
	}
	return nil, &app.ExitError{Code: app.ExitInvalidConfig, Err: fmt.Errorf("state.store %q is not one of file, s3, gcs", cfg.State.Store)}
}

// daemonFiles are the absolute paths of the daemon's files in cfg: the
// checkpoint document and a file lease.
func daemonFiles(cfg *config.Config) []string {
	var out []string
	for _, p := range []string{cfg.State.File.Path, cfg.Coordinate.FileLease.Path} {
		if abs, err := filepath.Abs(p); err == nil && p != "" {
			out = append(out, abs)
		}
	}
	return out
}

// openBackfillFile opens a backfill state file and takes its lock, the
// kernel lock on <path>.instance.lock (released when the process dies).
func openBackfillFile(path string) (*backfillState, error) {
	store, err := file.New(file.Config{Path: path})
	if err != nil {
		return nil, &app.ExitError{Code: app.ExitInvalidConfig, Err: err}
	}
	lock, err := file.LockInstance(store.Path(), 0)
	if errors.Is(err, ports.ErrAlreadyRunning) {
		holder, _ := os.ReadFile(store.Path() + ".instance.lock")
		who := strings.TrimSpace(string(holder))
		if who == "" {
			who = "holder unknown"
		}
		return nil, &app.ExitError{Code: 1, Err: fmt.Errorf("another sf2loki backfill is running on %s (%s holds %s.instance.lock): "+
			"let it finish or stop it; two backfills on one state would push the same files", store, who, store.Path())}
	}
	if err != nil {
		return nil, &app.ExitError{Code: 1, Err: err}
	}
	return &backfillState{store: store, lockName: lock.Path(), release: func() { _ = lock.Release() }}, nil
}

// lockObject takes the run lock of an object-store backfill state.
func lockObject(ctx context.Context, store, lockStore ports.ObjectCAS) (*backfillState, error) {
	l, err := domain.AcquireRunLock(ctx, lockStore, clock.New(), domain.RunLockConfig{Holder: app.HolderID("")})
	if errors.Is(err, domain.ErrRunLocked) {
		app.Closer(store)()
		app.Closer(lockStore)()
		return nil, &app.ExitError{Code: 1, Err: fmt.Errorf("another sf2loki backfill is running on %s: %w; let it finish or stop it "+
			"(a lock its run left behind is taken over once it has not been renewed for %s)", store, err, domain.DefaultRunLockTTL)}
	}
	if err != nil {
		app.Closer(store)()
		app.Closer(lockStore)()
		return nil, &app.ExitError{Code: 1, Err: err}
	}
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Release(ctx)
		app.Closer(lockStore)()
		app.Closer(store)()
	}
	return &backfillState{store: store, lockName: lockStore.String(), release: release, lost: l.Lost(), lostErr: l.Err}, nil
}

// load reads the document (none yet: no file is done).
func (s *backfillState) load(ctx context.Context, org string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc = backfillDoc{Org: org, Files: map[string]backfillDone{}}
	obj, err := s.store.Get(ctx)
	if errors.Is(err, ports.ErrNotFound) {
		return s.loadOlder(org)
	}
	if err != nil {
		return fmt.Errorf("read the backfill state %s: %w", s.store, err)
	}
	// The older implementation's backfill state, given as --state: taken
	// over in place (the next write is in this layout).
	older, isOlder, err := readOlderBackfill(obj.Data, org, s.olderFirst)
	if err != nil {
		return fmt.Errorf("the backfill state %s is the older implementation's, and %w; repair that key or move the file aside to start the backfill over", s.store, err)
	}
	if isOlder {
		s.doc.Older, s.version = older, obj.Version
		s.olderNote = fmt.Sprintf("%s is the older implementation's backfill state: %s taken as done up to their positions", s.store, app.Plural(int64(len(older)), "event type"))
		return nil
	}
	var doc backfillDoc
	if err := json.Unmarshal(obj.Data, &doc); err != nil {
		return fmt.Errorf("the backfill state %s is not a backfill state document (%w); move it aside to start the backfill over", s.store, err)
	}
	if doc.Files == nil {
		doc.Files = map[string]backfillDone{}
	}
	if org != "" {
		doc.Org = org
	}
	s.doc, s.version = doc, obj.Version
	return nil
}

// loadOlder reads the older implementation's backfill state file beside
// the checkpoint document, for a state that holds nothing yet. It is only
// read; its positions are kept in this state from its first write. s.mu
// held.
func (s *backfillState) loadOlder(org string) error {
	if s.olderPath == "" {
		return nil
	}
	data, err := os.ReadFile(s.olderPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the older implementation's backfill state %s: %w", s.olderPath, err)
	}
	older, isOlder, err := readOlderBackfill(data, org, s.olderFirst)
	if err != nil {
		return fmt.Errorf("the older implementation's backfill state %s: %w; repair that key or move the file aside (its event types are then loaded again)", s.olderPath, err)
	}
	if isOlder && len(older) > 0 {
		s.doc.Older = older
		s.olderNote = fmt.Sprintf("the older implementation's backfill state %s: %s taken as done up to their positions", s.olderPath, app.Plural(int64(len(older)), "event type"))
	}
	return nil
}

// done reports whether f was read before, as listed now (same CreatedDate).
func (s *backfillState) done(f salesforce.HistoryFile) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.doc.Files[f.ID]; ok && d.Created == f.Created {
		return true
	}
	c, ok := s.doc.Older[f.Interval+":"+f.EventType]
	if !ok {
		return false
	}
	created, err1 := salesforce.ParseTime(f.Created)
	last, err2 := salesforce.ParseTime(c.LastCreated)
	if err1 != nil || err2 != nil {
		return false
	}
	return created.Before(last) || (created.Equal(last) && slices.Contains(c.DoneIDs, f.ID))
}

// olderNotice says what was taken from the older implementation's
// backfill state ("" when nothing).
func (s *backfillState) olderNotice() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.olderNote
}

// mark records f as done (written by the next flush).
func (s *backfillState) mark(f salesforce.HistoryFile, rows int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc.Files[f.ID] = backfillDone{Created: f.Created, EventType: f.EventType, Interval: f.Interval,
		LogDate: f.LogDate.UTC().Format(time.RFC3339), Rows: rows}
	s.dirty = true
}

// size is how many files the document holds.
func (s *backfillState) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.doc.Files)
}

// flush writes the document when files were marked since the last write:
// one conditional write (this run holds the lock, so it is the only
// writer).
func (s *backfillState) flush(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return nil
	}
	data, err := json.MarshalIndent(s.doc, "", " ")
	pre := ports.CreateOnly()
	if s.version != "" {
		pre = ports.IfVersion(s.version)
	}
	s.dirty = false
	s.mu.Unlock()
	if err != nil {
		return err
	}
	v, err := s.store.Put(ctx, data, pre)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.dirty = true
		return fmt.Errorf("write the backfill state %s: %w", s.store, err)
	}
	s.version = v
	return nil
}

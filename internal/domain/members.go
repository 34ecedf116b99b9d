package domain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// Membership tells the replicas sharing shards which of them are alive, so
// that each can compute its fair share (Balance). It keeps one small
// document, beside the shards' leases, holding each replica's heartbeat: a
// counter the replica increments every renew interval with a
// compare-and-swap write. A replica is live, to another, while that one sees
// its counter change within the replica's ttl on its own clock (no clock is
// compared across machines: the same rule as a lease). A replica's entry
// that has not changed for longer than its ttl is dropped by the next
// writer, and a replica leaving gracefully removes its own.
//
// The document is soft state: nothing depends on it for safety (each
// shard's lease and fence do), so an unreadable one is replaced. Its cost is
// one GET and one conditional PUT per replica per renew interval.
type Membership struct {
	cas   ports.ObjectCAS
	clock ports.Clock
	cfg   MemberConfig
	req   requester
	log   *slog.Logger

	mu   sync.Mutex
	beat uint64
	seen map[string]seenBeat
	// dup is another process beating under this replica's holder id, seen
	// at dupAt; told is when that was last logged.
	dup         string
	dupAt, told time.Time
}

// MemberConfig configures a Membership.
type MemberConfig struct {
	// Holder identifies this replica (required; unique per replica).
	Holder string
	// Instance identifies this process lifetime.
	Instance string
	// TTL is how long a replica's heartbeat may stay unchanged before the
	// others count it gone; RenewInterval is how often it beats.
	TTL, RenewInterval time.Duration
	// RequestTimeout bounds each request (0: RenewInterval/2).
	RequestTimeout time.Duration
	Retry          RetryPolicy
	Logger         *slog.Logger
}

type seenBeat struct {
	instance string
	beat     uint64
	ttl      time.Duration
	at       time.Time // on this replica's clock, when the beat was first seen
	// since is when the replica became live to this one (first seen, or
	// seen beating again after it was counted gone).
	since time.Time
	// gone is set by MarkGone: not live to this replica until the beat
	// changes. The entry is not dropped from the document for it (only a
	// beat unchanged for its ttl is): the mark is this replica's opinion.
	gone bool
}

// memberEntry is one replica's heartbeat in the members document.
type memberEntry struct {
	Instance string `json:"instance"`
	Beat     uint64 `json:"beat"`
	TTL      string `json:"ttl"`
}

type membersDoc struct {
	Members map[string]memberEntry `json:"members"`
}

// membersMaxSize bounds the members document (about 100 bytes a replica).
const membersMaxSize = 1 << 20

// NewMembership validates cfg.
func NewMembership(cas ports.ObjectCAS, clock ports.Clock, cfg MemberConfig) (*Membership, error) {
	if cas == nil || clock == nil || cfg.Holder == "" {
		return nil, configErrorf("membership needs an object store, a clock and a holder id")
	}
	if cfg.TTL <= 0 || cfg.RenewInterval <= 0 || cfg.RenewInterval >= cfg.TTL {
		return nil, configErrorf("membership ttl %s must exceed its renew interval %s", cfg.TTL, cfg.RenewInterval)
	}
	if cfg.Instance == "" {
		cfg.Instance = newInstanceID()
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = cfg.RenewInterval / 2
	}
	policy := cfg.Retry.withDefaults()
	if err := policy.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Membership{cas: cas, clock: clock, cfg: cfg, log: log.With("members", cas.String()),
		req:  requester{cas: cas, clock: clock, policy: policy, timeout: cfg.RequestTimeout},
		seen: map[string]seenBeat{}}, nil
}

// String names the members document.
func (m *Membership) String() string { return m.cas.String() }

// Beat writes this replica's heartbeat: it reads the document, notes the
// others' beats, drops the entries unchanged for longer than their ttl, and
// writes its own with a compare-and-swap (a lost race is retried against a
// fresh read, up to three times).
func (m *Membership) Beat(ctx context.Context) error { return m.retry(ctx, true) }

// Leave removes this replica's entry (graceful stop), so that the others
// count it gone at once rather than after its ttl.
func (m *Membership) Leave(ctx context.Context) error { return m.retry(ctx, false) }

// retry writes (join: the heartbeat; else the removal), again against a
// fresh read after a lost compare-and-swap, three times at most.
func (m *Membership) retry(ctx context.Context, join bool) error {
	for range 3 {
		err := m.write(ctx, join)
		if !errors.Is(err, errLostCAS) {
			return err
		}
	}
	return fmt.Errorf("members %s: three writes in a row lost their compare-and-swap to other replicas' writes; the next renew interval tries again", m.cas)
}

func (m *Membership) write(ctx context.Context, join bool) error {
	obj, err := m.req.get(ctx)
	pre := ports.IfVersion(obj.Version)
	var doc membersDoc
	switch {
	case errors.Is(err, ports.ErrNotFound):
		pre = ports.CreateOnly()
	case errors.Is(err, ports.ErrTooLarge):
		m.log.Warn("the members document is larger than its cap; replacing it", "cap", membersMaxSize)
	case err != nil:
		return fmt.Errorf("members %s: %w", m.cas, err)
	default:
		if derr := json.Unmarshal(obj.Data, &doc); derr != nil {
			m.log.Warn("the members document is unreadable; replacing it (it holds heartbeats only)", "error", derr)
			doc = membersDoc{}
		}
	}
	if doc.Members == nil {
		doc.Members = map[string]memberEntry{}
	}
	now := m.clock.Now()
	m.mu.Lock()
	m.observe(doc, now)
	for h := range doc.Members {
		if h != m.cfg.Holder && !m.liveLocked(h, now) {
			delete(doc.Members, h)
		}
	}
	beat := m.beat + 1
	if join {
		doc.Members[m.cfg.Holder] = memberEntry{Instance: m.cfg.Instance, Beat: beat, TTL: m.cfg.TTL.String()}
	} else {
		delete(doc.Members, m.cfg.Holder)
	}
	m.mu.Unlock()
	data, _ := json.Marshal(doc)
	m.req.unknown = nil
	if _, err := m.req.put(ctx, data, pre, nil); err != nil {
		if errors.Is(err, errLostCAS) {
			return err
		}
		return fmt.Errorf("members %s: %w", m.cas, err)
	}
	m.mu.Lock()
	m.beat = beat
	m.mu.Unlock()
	return nil
}

// observe notes every entry whose beat (or instance) changed. m.mu held.
func (m *Membership) observe(doc membersDoc, now time.Time) {
	for h, e := range doc.Members {
		if h == m.cfg.Holder {
			if e.Instance == m.cfg.Instance {
				m.beat = max(m.beat, e.Beat)
				continue
			}
			// Another process wrote this replica's entry: two replicas
			// share a holder id. They count as one, so the shards cannot
			// be balanced between them.
			m.dup, m.dupAt = e.Instance, now
			if now.Sub(m.told) >= time.Minute {
				m.told = now
				m.log.Error("two replicas share the holder id; each must have its own (set holder_id or identity per replica, e.g. from the pod name): "+
					"they count as one replica and the shards cannot be balanced between them", "holder", h, "other_instance", e.Instance)
			}
			continue
		}
		ttl, err := time.ParseDuration(e.TTL)
		if err != nil || ttl <= 0 {
			ttl = m.cfg.TTL
		}
		ttl = min(ttl, foreignTTLCap*m.cfg.TTL)
		if s, ok := m.seen[h]; !ok || s.beat != e.Beat || s.instance != e.Instance {
			since := s.since
			if !ok || !m.liveLocked(h, now) || s.gone || s.instance != e.Instance {
				since = now
			}
			m.seen[h] = seenBeat{instance: e.Instance, beat: e.Beat, ttl: ttl, at: now, since: since}
		}
	}
	for h := range m.seen {
		if _, ok := doc.Members[h]; !ok {
			delete(m.seen, h)
		}
	}
}

func (m *Membership) liveLocked(h string, now time.Time) bool {
	s, ok := m.seen[h]
	return ok && now.Sub(s.at) < s.ttl
}

// MarkGone counts replica h gone until this replica sees its heartbeat
// change again: the balance learned it is dead (a lease it let go stale, or
// released as it stopped) before its heartbeat's ttl ran out. instance is
// the process the lease names: a heartbeat of another process under the
// same holder id (a restart) is not marked; "" marks whichever beats.
func (m *Membership) MarkGone(h, instance string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.seen[h]; ok && h != m.cfg.Holder && (instance == "" || instance == s.instance) {
		s.gone = true
		m.seen[h] = s
	}
}

// Newest returns when the replica that became live to this one last did
// so (zero when no other replica is live).
func (m *Membership) Newest() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	var newest time.Time
	for h, s := range m.seen {
		if !s.gone && m.liveLocked(h, now) && s.since.After(newest) {
			newest = s.since
		}
	}
	return newest
}

// Duplicate returns the instance of another process seen beating under
// this replica's holder id within its ttl, or "".
func (m *Membership) Duplicate() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dup != "" && m.clock.Now().Sub(m.dupAt) < m.cfg.TTL {
		return m.dup
	}
	return ""
}

// Live returns the live replicas, sorted: this one (once it has joined) and
// those whose heartbeat this replica saw change within their ttl.
func (m *Membership) Live() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	out := []string{m.cfg.Holder}
	for h, s := range m.seen {
		if !s.gone && m.liveLocked(h, now) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

package domain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// The sources the overlap guard knows, by their key under sources.
const (
	SourcePubSub          = "pubsub"
	SourceEventLogFile    = "eventlogfile"
	SourceEventlogObjects = "eventlog_objects"
	SourceSynthetic       = "synthetic"
)

// categorySuffixes are cut from a lower-cased name's end, the first that
// matches: eventlog names Salesforce's Event Log Objects (LoginEventLog,
// the queryable twin of the Login EventLogFile type).
var categorySuffixes = []string{"eventstream", "eventstore", "eventlog", "event"}

// categoryAliases are categories another name spells differently.
var categoryAliases = map[string]string{"loginhistory": "login"}

// Category is the event category a source's name ingests: the name's last
// path element (a Pub/Sub topic /event/LoginEventStream gives
// LoginEventStream) in lower case (SOQL names are case-insensitive),
// spaces removed, without a trailing eventstream, eventstore, eventlog or
// event; loginhistory is login. So the Pub/Sub topic
// /event/LoginEventStream, the objects LoginEvent, loginevent and
// LoginEventLog (eventlog_objects) and the EventLogFile type Login are all
// login: each ships the same logins.
//
// ok is false for a name that never overlaps another: a custom or
// namespaced one (any __ suffix: platform events __e, objects __c, big
// objects __b; Salesforce's own big objects such as LoginEvent have none),
// a Pub/Sub topic outside /event/ (Change Data Capture and its channels,
// /data/...), "*", and anything of the synthetic source.
func Category(source, name string) (cat string, ok bool) {
	if source == SourceSynthetic {
		return "", false
	}
	if source == SourcePubSub && !strings.HasPrefix(name, "/event/") {
		return "", false
	}
	base := strings.ToLower(strings.ReplaceAll(name[strings.LastIndexByte(name, '/')+1:], " ", ""))
	if base == "" || base == "*" || strings.Contains(base, "__") {
		return "", false
	}
	for _, suffix := range categorySuffixes {
		if cut, found := strings.CutSuffix(base, suffix); found && cut != "" {
			base = cut
			break
		}
	}
	cat = base
	if alias, found := categoryAliases[cat]; found {
		cat = alias
	}
	return cat, true
}

// Owner is the source that ingests a category, and the name it ingests it
// by.
type Owner struct {
	Source string // pubsub, eventlogfile or eventlog_objects
	Name   string // the topic, event type or object
	// Static: named in the configuration; else claimed by a "*" listing.
	Static bool
	// Entry is the orgs entry that names it when that is another entry of
	// the same Salesforce org (one org split over shards); "" for the
	// registry's own entry. No source of this registry ingests a category
	// another entry owns.
	Entry string
}

// String is the owner as logs name it: sources.pubsub (/event/LoginEventStream),
// or orgs entry "uat-rt"'s sources.pubsub (/event/LoginEventStream).
func (o Owner) String() string {
	if o.Entry != "" {
		return fmt.Sprintf("orgs entry %q's sources.%s (%s)", o.Entry, o.Source, o.Name)
	}
	return fmt.Sprintf("sources.%s (%s)", o.Source, o.Name)
}

// Decision is the registry's answer about one listed name.
type Decision struct {
	Name string
	// Category is the name's category, "" for a name that never overlaps.
	Category string
	// Ingest: the lister ingests the name.
	Ingest bool
	// Owner is the category's owner (the lister itself when it ingests a
	// categorised name); zero while the category is Pending or exempt.
	Owner Owner
	// Claimed: this listing made the lister the category's owner.
	Claimed bool
	// Pending: a "*" source ahead of the lister has not listed yet, so the
	// category is decided by a later listing (the lister skips the name
	// meanwhile). A lister that calls Await first never sees it.
	Pending bool
	// First: the first decision about the name given to this source, for
	// logging a skip once.
	First bool
}

// Waiting is what Await reports while it waits.
type Waiting struct {
	// For are the "*" sources whose first listing is awaited.
	For []string
	// Err is the latest error of their listings; nil when none failed yet.
	Err error
	// Waited is how long the wait has lasted.
	Waited time.Duration
}

// Owners records, for one org, which source ingests each event category
// (see Category), so that sources discovering names with "*" never ingest
// a category another source of the org already ingests. It is safe for
// concurrent use.
//
// The rule:
//   - A name the configuration lists (Static) owns its category; the
//     configuration check refuses two sources listing one category unless
//     sources.allow_overlap is set, and then no registry is used at all.
//   - A name another orgs entry of the same Salesforce org lists
//     (Elsewhere: one org split over shards, each led by any replica) owns
//     its category too, and none of this registry's sources ingests it.
//   - A "*" source asks with List each time it lists the org; a listed name
//     whose category is unowned is claimed by the lister, and the first
//     claimer keeps it for as long as the registry lives (the process), so
//     rediscovery never moves a category: one already owned by another
//     source stays with it, and a new one goes to whichever source lists it
//     first.
//   - Two "*" sources at once would race for the categories both can
//     list. The wildcards given to NewOwners are in precedence order: a
//     source waits (Await) until every "*" source ahead of it has
//     published its first successful listing, so the leading one (Pub/Sub,
//     real time) takes every category its first listing holds, and the
//     other one takes the rest; the result does not depend on which
//     answer arrives first. A failed listing publishes nothing: the sources
//     behind it keep waiting (Await reports the error) rather than guess
//     and ingest a category twice.
//   - Exempt names (Category's ok false) and a source's own static names
//     are always ingested.
type Owners struct {
	mu        sync.Mutex
	owners    map[string]Owner   // by category
	static    map[[2]string]bool // (source, name) the configuration lists
	seen      map[[2]string]bool // (source, name) decided once
	wildcards []string           // "*" sources in precedence order
	listed    map[string]bool    // "*" sources that published a listing
	failed    map[string]error   // the latest failure of each unlisted "*" source
	changed   chan struct{}      // closed and replaced on every listing or failure
}

// NewOwners returns an empty registry; wildcards are the sources with "*",
// in precedence order (pubsub first).
func NewOwners(wildcards ...string) *Owners {
	return &Owners{owners: map[string]Owner{}, static: map[[2]string]bool{}, seen: map[[2]string]bool{},
		wildcards: slices.Clone(wildcards), listed: map[string]bool{}, failed: map[string]error{}, changed: make(chan struct{})}
}

// Static records a name the configuration lists for source: it owns its
// category, unless another static name already does.
func (o *Owners) Static(source, name string) {
	cat, ok := Category(source, name)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.static[[2]string{source, name}] = true
	if _, taken := o.owners[cat]; !taken {
		o.owners[cat] = Owner{Source: source, Name: name, Static: true}
	}
}

// Elsewhere records a name that entry, another orgs entry of the same
// Salesforce org, lists for source: it owns its category for every source
// of this registry, unless a name of this registry's own configuration
// (Static, called first) already does; the configuration check refuses a
// category named by two entries.
func (o *Owners) Elsewhere(entry, source, name string) {
	cat, ok := Category(source, name)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, taken := o.owners[cat]; !taken {
		o.owners[cat] = Owner{Source: source, Name: name, Static: true, Entry: entry}
	}
}

// Owner returns the owner of cat, if any.
func (o *Owners) Owner(cat string) (Owner, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.owners[cat]
	return w, ok
}

// List decides each name source listed, claiming the unowned categories
// for it, and publishes source's listing to the sources waiting behind it.
// Call it with a successful listing only.
func (o *Owners) List(source string, names []string) []Decision {
	o.mu.Lock()
	defer o.mu.Unlock()
	ahead := o.ahead(source)
	out := make([]Decision, 0, len(names))
	for _, name := range names {
		d := Decision{Name: name}
		key := [2]string{source, name}
		cat, ok := Category(source, name)
		switch {
		case !ok:
			d.Ingest = true
		case o.static[key]:
			d.Category, d.Ingest, d.Owner = cat, true, o.owners[cat]
		default:
			d.Category = cat
			if w, taken := o.owners[cat]; taken {
				d.Owner, d.Ingest = w, w.Source == source && w.Entry == ""
			} else if len(ahead) > 0 {
				d.Pending = true
			} else {
				d.Owner = Owner{Source: source, Name: name}
				o.owners[cat] = d.Owner
				d.Ingest, d.Claimed = true, true
			}
		}
		if ok && !d.Pending && !o.seen[key] {
			o.seen[key] = true
			d.First = true
		}
		out = append(out, d)
	}
	if slices.Contains(o.wildcards, source) && !o.listed[source] {
		o.listed[source] = true
		delete(o.failed, source)
		o.signal()
	}
	return out
}

// ListFailed records that source's listing failed: the sources waiting
// behind it report err.
func (o *Owners) ListFailed(source string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.listed[source] || !slices.Contains(o.wildcards, source) {
		return
	}
	o.failed[source] = err
	o.signal()
}

// signal wakes the waiters; o.mu is held.
func (o *Owners) signal() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// ahead are the "*" sources before source that have not listed yet; o.mu
// is held.
func (o *Owners) ahead(source string) []string {
	var out []string
	for _, w := range o.wildcards {
		if w == source {
			break
		}
		if !o.listed[w] {
			out = append(out, w)
		}
	}
	return out
}

// Await returns once every "*" source ahead of source has published its
// first listing, or with ctx's error. While it waits it reports: at once,
// at the first failure of a listing awaited, and every interval after
// (with the latest failure). It does not give up: going ahead could ingest
// a category twice.
func (o *Owners) Await(ctx context.Context, source string, clk ports.Clock, every time.Duration, report func(Waiting)) error {
	ahead, changed, err := o.waitState(source)
	if len(ahead) == 0 {
		return nil
	}
	start := clk.Now()
	timer := clk.NewTimer(every)
	defer timer.Stop()
	send := func(ahead []string, err error) {
		timer.Reset(every)
		report(Waiting{For: ahead, Err: err, Waited: clk.Now().Sub(start)})
	}
	send(ahead, err)
	failureReported := err != nil
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
			if ahead, changed, err = o.waitState(source); len(ahead) == 0 {
				return nil
			}
			if err != nil && !failureReported {
				send(ahead, err)
				failureReported = true
			}
		case <-timer.C():
			if ahead, changed, err = o.waitState(source); len(ahead) == 0 {
				return nil
			}
			send(ahead, err)
			failureReported = failureReported || err != nil
		}
	}
}

// waitState is what Await waits for: the "*" sources ahead of source not
// listed yet, the channel closed at their next change, and the latest
// failure among them.
func (o *Owners) waitState(source string) (ahead []string, changed <-chan struct{}, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ahead = o.ahead(source)
	for _, w := range ahead {
		if e := o.failed[w]; e != nil {
			err = e
		}
	}
	return ahead, o.changed, err
}

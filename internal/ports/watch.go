package ports

import "context"

// Change is one state of a watched object as its store reported it.
type Change struct {
	// Object is the object's state (Data and Version, exactly as Get would
	// return them) when Absent is false and Err is nil.
	Object Object
	// Absent reports that the object was deleted or does not exist.
	Absent bool
	// Err, when set, reports that the watch broke (the connection dropped,
	// the store refused it, its history expired): changes may be missed
	// until the next Change without Err, which carries the current state
	// again. Readers poll meanwhile. One exception: an Err wrapping
	// ErrTooLarge, with Object.Version set, is a state (a document over the
	// size cap, exactly as Get reports it), not a broken watch.
	Err error
}

// Watcher is an optional capability of an ObjectCAS whose store pushes
// changes: a Kubernetes watch, inotify on a local file. S3 and GCS have none.
//
// A Change is an observation like a Get, and no more: it may arrive late, it
// may repeat a state already reported, and a state may be skipped (an
// adapter coalesces a burst to its latest state, and a broken watch misses
// what happened while it was down). A reader that acts on a Change must do
// so through a conditional write on the Version it carries, never on the
// assumption that no Change means no change. Contract every adapter must
// honour (checked by porttest.RunWatcher against its real server):
//   - Watch returns at once and reports on the channel until ctx ends, then
//     closes it. It never blocks on a slow reader: it keeps the latest
//     state for it instead.
//   - The first Change is the object's state when the watch started (read,
//     not pushed), and after every Change with Err the next Change without
//     Err is the current state again; the adapter re-establishes a broken
//     watch by itself (resuming where it can, re-reading where it cannot).
//   - Every write that lands is followed, while the watch is up, by a Change
//     carrying that state or a later one.
type Watcher interface {
	// Watch reports the object's states until ctx ends.
	Watch(ctx context.Context) <-chan Change
}

// Offer puts c in ch, a channel of one slot, replacing a Change its reader
// has not taken yet: the reader always finds the latest state, and the
// sender never waits for it. Only a channel's sole sender may call it.
func Offer(ch chan Change, c Change) {
	for {
		select {
		case ch <- c:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

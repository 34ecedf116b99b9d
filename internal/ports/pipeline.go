package ports

import (
	"context"
	"time"
)

// Checkpoint is a source's position for one key of the checkpoint
// document, e.g. ("pubsub:/event/LoginEventStream", "<replay id>").
type Checkpoint struct {
	Key   string
	Value string
}

// Entry is one log line on its way to Loki, with the checkpoint it
// advances once pushed. Its Labels and Metadata maps may be shared with
// other entries (a source's entries of one file share them): nothing
// writes to them once the entry is made; whoever adds a label copies the
// map first.
type Entry struct {
	Time     time.Time
	Labels   map[string]string
	Line     string
	Metadata map[string]string
	// Checkpoint is committed after this entry (and everything queued
	// before it on the same key) has been pushed.
	Checkpoint Checkpoint
	// CheckpointOnly entries carry no line: they only move a checkpoint
	// (a keepalive's replay id), after the entries queued before them.
	CheckpointOnly bool
}

// Lane is the queue an entry travels in. A source's keys stay in one lane,
// which preserves their order.
type Lane int

// Lanes: realtime streams must not wait behind bulk downloads.
const (
	LaneRealtime Lane = iota
	LaneBulk
)

func (l Lane) String() string {
	if l == LaneBulk {
		return "bulk"
	}
	return "realtime"
}

// Source produces entries. It never commits: the pipeline commits after
// the sink accepted the data.
type Source interface {
	// Name identifies the source in logs and metrics.
	Name() string
	// Lane is the queue its entries travel in.
	Lane() Lane
	// Run streams entries through emit, starting after the positions that
	// resume returns, until ctx ends or the source is exhausted. emit blocks
	// while the lane is full (backpressure) and fails once ctx ends; it is
	// safe for concurrent use (a source may emit from one goroutine per
	// object, type or topic).
	Run(ctx context.Context, resume func(key string) (string, bool), emit func(Entry) error) error
}

// Sink pushes batches of entries (to Loki).
type Sink interface {
	// Push sends the entries. nil means accepted (entries the backend
	// rejected for good are dropped, counted by the sink, and their
	// checkpoints may advance). A transient error (IsTransient) means
	// nothing was accepted and the batch must be retried; any other error
	// is fatal for the pipeline. Push reads batch and neither changes nor
	// keeps it (nor its slice) once it returns: the pipeline retries the
	// same batch and releases its checkpoints from it.
	Push(ctx context.Context, batch []Entry) error
}

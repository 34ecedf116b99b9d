package domain

import (
	"testing"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// An entry's cost is remembered per shared map, never mixed up between
// maps of the same length, and is the same as measuring afresh.
func TestEntryCostsRememberSharedMaps(t *testing.T) {
	short := map[string]string{"a": "1"}
	long := map[string]string{"job": "sf2loki-event-monitoring"}
	meta := map[string]string{"level": "info"}
	fresh := func(e ports.Entry) int64 {
		if e.CheckpointOnly {
			return 0
		}
		n := len(e.Line) + 64 + len(e.Checkpoint.Value)
		for _, m := range []map[string]string{e.Labels, e.Metadata} {
			for k, v := range m {
				n += len(k) + len(v)
			}
		}
		return int64(n)
	}
	entries := []ports.Entry{
		{Line: "x", Labels: short, Metadata: meta, Checkpoint: ports.Checkpoint{Key: "k", Value: "12"}},
		{Line: "xy", Labels: short, Metadata: meta},
		{Line: "x", Labels: long, Metadata: meta},
		{Line: "x", Labels: short},
		{Line: "x", Labels: map[string]string{"a": "1"}, Metadata: map[string]string{"level": "error"}},
		{Line: "x"},
		{CheckpointOnly: true, Labels: long, Checkpoint: ports.Checkpoint{Key: "k", Value: "13"}},
		{Line: "x", Labels: long, Metadata: meta},
	}
	var c costs
	for i, e := range entries {
		if got, want := c.of(e), fresh(e); got != want {
			t.Errorf("entry %d: cost %d, want %d", i, got, want)
		}
	}
}

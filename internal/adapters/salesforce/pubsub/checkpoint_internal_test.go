package pubsub

import (
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub/eventbus"
)

// TestCheckpointValuesAreEachEventsCheckpoint checks that the values
// encoded a response at a time are checkpoint's, event by event, replay
// ids of every length (none, and lengths base64 pads) included.
func TestCheckpointValuesAreEachEventsCheckpoint(t *testing.T) {
	var events []*eventbus.ConsumerEvent
	for n := range 20 {
		id := make([]byte, n)
		for i := range id {
			id[i] = byte(n*31 + i*7)
		}
		if n == 3 {
			id = nil
		}
		events = append(events, &eventbus.ConsumerEvent{ReplayId: id})
	}
	got := checkpointValues([]string{"stale"}[:0], events)
	if len(got) != len(events) {
		t.Fatalf("%d values for %d events", len(got), len(events))
	}
	for i, ev := range events {
		if want := checkpoint("/event/X", ev.GetReplayId()).Value; got[i] != want {
			t.Errorf("event %d: %q, want %q", i, got[i], want)
		}
	}
	if got := checkpointValues(nil, nil); len(got) != 0 {
		t.Errorf("no events: %q", got)
	}
}

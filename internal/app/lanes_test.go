package app

import (
	"context"
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// laneSource is a source that only names its lane.
type laneSource ports.Lane

func (s laneSource) Name() string     { return ports.Lane(s).String() }
func (s laneSource) Lane() ports.Lane { return ports.Lane(s) }
func (laneSource) Run(context.Context, func(string) (string, bool), func(ports.Entry) error) error {
	return nil
}

func TestShrinkUnfedLanes(t *testing.T) {
	rt, bulk := laneSource(ports.LaneRealtime), laneSource(ports.LaneBulk)
	for name, tc := range map[string]struct {
		sources          []ports.Source
		wantRT, wantBulk int
	}{
		"streams only": {[]ports.Source{rt}, 10000, 1},
		"files only":   {[]ports.Source{bulk, bulk}, 1, 10000},
		"both":         {[]ports.Source{bulk, rt}, 10000, 10000},
	} {
		t.Run(name, func(t *testing.T) {
			r, b := domain.DefaultLane, domain.DefaultLane
			shrinkUnfedLanes(tc.sources, &r, &b)
			if r.QueueEntries != tc.wantRT || b.QueueEntries != tc.wantBulk {
				t.Errorf("queue entries realtime %d, bulk %d; want %d, %d", r.QueueEntries, b.QueueEntries, tc.wantRT, tc.wantBulk)
			}
			// Only the queue's slots change: the bytes and batches stay.
			r.QueueEntries, b.QueueEntries = domain.DefaultLane.QueueEntries, domain.DefaultLane.QueueEntries
			if r != domain.DefaultLane || b != domain.DefaultLane {
				t.Errorf("other lane bounds changed: %+v, %+v", r, b)
			}
		})
	}
}

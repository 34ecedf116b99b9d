package pubsub_test

import (
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/internal/domain/shape"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
)

func shaper(t *testing.T, cfg shape.Config) *shape.Shaper {
	t.Helper()
	s, err := shape.New("pubsub", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// all reports whether n entries (events and checkpoints) arrived.
func all(n int) func([]ports.Entry) bool {
	return func(es []ports.Entry) bool { return len(es) >= n }
}

func TestEventsAreTransformedAndADroppedOneCommitsItsReplayID(t *testing.T) {
	sh := shaper(t, shape.Config{Salt: "pepper", Rules: []shape.Rule{
		{Action: shape.Hash, Fields: []string{"UserId", "CreatedById"}},
		{Action: shape.Mask, Fields: []string{"SourceIp", "Username"}},
		{Action: shape.DropField, Fields: []string{"EventDate", "CreatedDate"}},
		{Action: shape.DropRow, Match: map[string]string{"Status": "Invalid*"}, EventTypes: []string{"/event/*Stream"}},
	}})
	e := newEnv(t, pubsub.Spec{ReplayPreset: pubsub.Earliest, Shaper: sh}, nil)
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 12)...)
	got := e.run(t, nil, &sink{}, all(12))
	for i, en := range got {
		if en.Checkpoint.Value != e.b64(fakepubsub.LoginTopic, i+1) {
			t.Fatalf("entry %d carries %s", i, en.Checkpoint.Value)
		}
		if i == 9 { // Invalid Password
			if !en.CheckpointOnly {
				t.Fatalf("event 9 was not dropped: %+v", en)
			}
			continue
		}
		ev := events([]ports.Entry{en})[0]
		if _, ok := ev["EventDate"]; ok || len(ev["UserId"].(string)) != shape.HashLen || ev["SourceIp"] != "192.0.2.x" ||
			ev["Username"] != "***@example.com" || ev["EventIdentifier"] != fmt.Sprint("login-", i) {
			t.Fatalf("event %d: %v", i, ev)
		}
		// Timed by the event as decoded, though its EventDate is dropped.
		if want := t0.Add(time.Duration(i) * time.Second); !en.Time.Equal(want) {
			t.Fatalf("event %d at %v, want %v", i, en.Time, want)
		}
	}
}

func TestEventsAreSampledByReplayID(t *testing.T) {
	cfg := shape.Config{Sample: map[string]float64{"/event/LoginEventStream": 0.5}}
	e := newEnv(t, pubsub.Spec{ReplayPreset: pubsub.Earliest, Shaper: shaper(t, cfg)}, nil)
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 60)...)
	got := e.run(t, nil, &sink{}, all(60))
	ref := shaper(t, cfg).For(fakepubsub.LoginTopic)
	var want []string
	for i := range 60 {
		if ref.Keep(hex.EncodeToString(e.srv.ReplayID(fakepubsub.LoginTopic, i+1))) {
			want = append(want, fakepubsub.LoginEvent(i, t0)["EventIdentifier"].(string))
		}
	}
	if ids := identifiers(got); !slices.Equal(ids, want) || len(want) < 15 || len(want) > 45 {
		t.Fatalf("kept %v, want %v", ids, want)
	}
	for i, en := range got {
		if en.Checkpoint.Value != e.b64(fakepubsub.LoginTopic, i+1) {
			t.Fatalf("entry %d carries %s: a sampled-out event must commit its replay id", i, en.Checkpoint.Value)
		}
	}
}

package synthetic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/synthetic"
	"github.com/sf2loki/sf2loki/internal/ports"
)

func TestResumesEachSequenceAfterItsCheckpoint(t *testing.T) {
	s, err := synthetic.New(synthetic.Config{Rate: 10000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var got []ports.Entry
	resume := func(k string) (string, bool) {
		if k == "synthetic:LoginEvent" {
			return "41", true
		}
		return "", false
	}
	err = s.Run(ctx, resume, func(e ports.Entry) error {
		got = append(got, e)
		if len(got) == 4 {
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"synthetic:LoginEvent=42", "synthetic:ApiEvent=1", "synthetic:LoginEvent=43", "synthetic:ApiEvent=2"}
	for i, e := range got[:4] {
		if e.Checkpoint.Key+"="+e.Checkpoint.Value != want[i] {
			t.Fatalf("entry %d checkpoint %v, want %s", i, e.Checkpoint, want[i])
		}
		var body map[string]any
		if err := json.Unmarshal([]byte(e.Line), &body); err != nil || body["EventType"] != e.Labels["event_type"] || e.Metadata["sequence"] != e.Checkpoint.Value {
			t.Fatalf("entry %d: %+v (%v)", i, e, err)
		}
	}
	if _, err := synthetic.New(synthetic.Config{}); err == nil {
		t.Fatal("rate 0 accepted")
	}
	if s.Lane() != ports.LaneRealtime || s.Name() != "synthetic" {
		t.Fatal("identity")
	}
	_ = time.Second
}

// An unreadable stored sequence never stops the source: it logs an ERROR
// naming the key and the repair commands, counts it, and starts that event
// type from 1.
func TestUnreadableCheckpointStartsFromOne(t *testing.T) {
	var logs bytes.Buffer
	garbage := 0
	s, err := synthetic.New(synthetic.Config{Rate: 10000, EventTypes: []string{"LoginEvent"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), GarbageCheckpoint: func() { garbage++ }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var got []ports.Entry
	err = s.Run(ctx, func(k string) (string, bool) { return "abc", k == "synthetic:LoginEvent" }, func(e ports.Entry) error {
		got = append(got, e)
		cancel()
		return nil
	})
	if err != nil {
		t.Fatalf("the source stopped on an unreadable checkpoint: %v", err)
	}
	if len(got) == 0 || got[0].Checkpoint.Value != "1" || garbage != 1 {
		t.Fatalf("first entry %+v (%d counted), want sequence 1 and one count", got, garbage)
	}
	out := logs.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "sf2loki state set synthetic:LoginEvent") ||
		!strings.Contains(out, "sf2loki state delete synthetic:LoginEvent") {
		t.Fatalf("the log does not say ERROR and the repair commands:\n%s", out)
	}
	for v, ok := range map[string]bool{"0": true, "41": true, "": false, "abc": false, "-1": false, "1.5": false} {
		if err := synthetic.CheckSequence(v); (err == nil) != ok {
			t.Errorf("CheckSequence(%q) = %v, want ok=%v", v, err, ok)
		}
	}
}

package synthetic_test

import (
	"context"
	"encoding/json"
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

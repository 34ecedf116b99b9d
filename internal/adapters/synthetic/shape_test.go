package synthetic_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/synthetic"
	"github.com/sf2loki/sf2loki/internal/domain/shape"
	"github.com/sf2loki/sf2loki/internal/ports"
)

func TestEventsAreTransformedAndSampledBySequence(t *testing.T) {
	cfg := shape.Config{Salt: "pepper", Sample: map[string]float64{"ApiEvent": 0.5}, Rules: []shape.Rule{
		{Action: shape.Hash, Fields: []string{"UserId"}},
		{Action: shape.DropField, Fields: []string{"Username"}, EventTypes: []string{"LoginEvent"}},
	}}
	sh, err := shape.New("synthetic", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := shape.New("synthetic", shape.Config{Sample: cfg.Sample})
	s, err := synthetic.New(synthetic.Config{Rate: 100000, Shaper: sh})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var got []ports.Entry
	_ = s.Run(ctx, func(string) (string, bool) { return "", false }, func(e ports.Entry) error {
		if got = append(got, e); len(got) == 200 {
			cancel()
		}
		return nil
	})
	for _, e := range got {
		seq, _ := strconv.ParseUint(e.Checkpoint.Value, 10, 64)
		api := e.Checkpoint.Key == "synthetic:ApiEvent"
		if api && e.CheckpointOnly == ref.For("ApiEvent").Keep(e.Checkpoint.Value) || !api && e.CheckpointOnly {
			t.Fatalf("%s sequence %d: checkpoint-only %v", e.Checkpoint.Key, seq, e.CheckpointOnly)
		}
		if e.CheckpointOnly {
			continue
		}
		var body map[string]any
		if err := json.Unmarshal([]byte(e.Line), &body); err != nil {
			t.Fatal(err)
		}
		_, hasName := body["Username"]
		if u, _ := body["UserId"].(string); len(u) != shape.HashLen || e.Metadata["user_id"] != u || hasName == !api {
			t.Fatalf("entry %+v", e)
		}
	}
}

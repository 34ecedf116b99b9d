package salesforce_test

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/domain/shape"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// Transforms see a log's fields and its body (Body); sampling decides by
// the log's Id before the body is downloaded; a log left out, or dropped,
// still moves the position.
func TestApexLogTransformsAndSampling(t *testing.T) {
	org := &fakesf.ApexOrg{}
	at := apexNow.Add(-10 * time.Minute)
	for i := 1; i <= 40; i++ {
		status := "Success"
		if i == 3 {
			status = "System.CalloutException: Read timed out"
		}
		org.Add(fakesf.ApexLog{ID: apexID(i), UserID: fmt.Sprintf("005%015d", i), Start: at.Add(time.Duration(i) * time.Second), Status: status,
			Body: fmt.Sprintf("USER_DEBUG|token=s3cr3t-%d|done", i)})
	}
	var sampled, filtered atomic.Int32
	sh := shaper(t, shape.Config{Salt: "pepper", Sample: map[string]float64{"ApexLog": 0.5},
		SampledOut: func(string) { sampled.Add(1) }, Filtered: func(string) { filtered.Add(1) },
		Rules: []shape.Rule{
			{Action: shape.Hash, Fields: []string{"LogUserId"}},
			{Action: shape.RegexReplace, Fields: []string{"Body"}, Pattern: `token=[^|]*`, Replacement: "token=***"},
			{Action: shape.DropRow, Match: map[string]string{"Status": "System.CalloutException*"}},
		}})
	s := apexSource(t, org, salesforce.ApexLogSpec{})
	s.Shaper = sh
	var shipped []string
	// Every log emits its position: 40 entries, lines or positions.
	for _, e := range runApex(t, s, nil, 40) {
		if !strings.Contains(e.Checkpoint.Value, e.Metadata["Id"]) && !e.CheckpointOnly {
			t.Fatalf("entry %+v does not carry the position after its log", e)
		}
		if e.CheckpointOnly {
			continue
		}
		shipped = append(shipped, e.Metadata["Id"])
		if strings.Contains(e.Line, "s3cr3t") || !strings.HasPrefix(e.Line, "USER_DEBUG|token=***|done") ||
			len(e.Metadata["LogUserId"]) != shape.HashLen || e.Metadata["Id"] == apexID(3) {
			t.Fatalf("entry %+v: the transforms did not apply", e)
		}
	}
	if len(shipped) == 0 || len(shipped) >= 40 || int(sampled.Load())+len(shipped)+int(filtered.Load()) != 40 {
		t.Fatalf("%d shipped, %d sampled out, %d filtered of 40", len(shipped), sampled.Load(), filtered.Load())
	}
	dl := org.DownloadsSoFar()
	if len(dl) != len(shipped)+int(filtered.Load()) {
		t.Fatalf("%d downloads for %d logs kept by sampling: a sampled-out log was downloaded", len(dl), len(shipped)+int(filtered.Load()))
	}
	// The same logs are kept again (deterministic on the Id).
	s2 := apexSource(t, org, salesforce.ApexLogSpec{})
	s2.Shaper = shaper(t, shape.Config{Salt: "pepper", Sample: map[string]float64{"ApexLog": 0.5}})
	var again []string
	for _, e := range runApex(t, s2, nil, 40) {
		if !e.CheckpointOnly && e.Metadata["Id"] != apexID(3) {
			again = append(again, e.Metadata["Id"])
		}
	}
	if !slices.Equal(again, shipped) {
		t.Fatalf("sampled %v, then %v", shipped, again)
	}
}

// A drop_field of Body ships the log as its metadata.
func TestApexLogBodyDroppedByATransform(t *testing.T) {
	org := &fakesf.ApexOrg{}
	org.Add(fakesf.ApexLog{ID: apexID(1), Start: apexNow.Add(-time.Minute), Body: "secret body"})
	s := apexSource(t, org, salesforce.ApexLogSpec{})
	s.Shaper = shaper(t, shape.Config{Rules: []shape.Rule{{Action: shape.DropField, Fields: []string{"Body"}}}})
	e := runApex(t, s, nil, 1)[0]
	if strings.Contains(e.Line, "secret") || e.Metadata["body_skipped"] != "true" || e.Metadata["body_skip_reason"] != "dropped by a drop_field transform" {
		t.Fatalf("entry %+v", e)
	}
}

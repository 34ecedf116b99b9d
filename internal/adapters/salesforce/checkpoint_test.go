package salesforce_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// An unreadable stored position never stops a source: it logs an ERROR
// naming the key and the repair commands, counts it, and starts from the
// lookback window.
func TestUnreadableCheckpointLogsTheRepairAndFallsBack(t *testing.T) {
	srv := httptest.NewServer(&fakesf.Org{})
	t.Cleanup(srv.Close)
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	now := clockAt(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	soql, err := salesforce.NewSOQLSource(a, "60.0", []salesforce.ObjectSpec{{Name: "LoginEvent", PollInterval: time.Hour}}, now, log)
	if err != nil {
		t.Fatal(err)
	}
	elf, err := salesforce.NewELFSource(a, "60.0", salesforce.ELFSpec{Interval: "Hourly", EventTypes: []string{"API"}, PollInterval: time.Hour}, now, log)
	if err != nil {
		t.Fatal(err)
	}
	var garbage sync.Map
	soql.GarbageCheckpoint = func() { garbage.Store("soql", true) }
	elf.GarbageCheckpoint = func() { garbage.Store("elf", true) }
	stored := map[string]string{"eventlog_objects:LoginEvent": "abc", "eventlogfile:API": `{"last_created":"yesterday"}`}
	resume := func(k string) (string, bool) { v, ok := stored[k]; return v, ok }
	for _, src := range []ports.Source{soql, elf} {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		err := src.Run(ctx, resume, func(ports.Entry) error { return nil })
		cancel()
		if err != nil {
			t.Fatalf("%s stopped on an unreadable checkpoint: %v", src.Name(), err)
		}
	}
	out := logs.String()
	for key := range stored {
		var line string
		for l := range strings.Lines(out) {
			if strings.Contains(l, key) {
				line = l
			}
		}
		if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "sf2loki state set "+key) ||
			!strings.Contains(line, "sf2loki state delete "+key) || !strings.Contains(line, "lookback") {
			t.Errorf("the log for %s does not say ERROR, the repair commands and the fallback:\n%s", key, out)
		}
	}
	for _, k := range []string{"soql", "elf"} {
		if _, ok := garbage.Load(k); !ok {
			t.Errorf("%s did not count the unreadable checkpoint", k)
		}
	}
}

func TestCheckpointValueChecks(t *testing.T) {
	for _, tc := range []struct {
		check func(string) error
		value string
		ok    bool
	}{
		{salesforce.CheckSOQLCheckpoint, `{"last_ts":"2026-11-28T10:00:00.000+0000","ids":["0Lg000000000001"]}`, true},
		{salesforce.CheckSOQLCheckpoint, `2026-11-28T10:00:00Z`, true},
		{salesforce.CheckSOQLCheckpoint, `abc`, false},
		{salesforce.CheckSOQLCheckpoint, `{"last_ts":"soon"}`, false},
		{salesforce.CheckSOQLCheckpoint, ``, false},
		{salesforce.CheckELFCheckpoint, `{"last_created":"2026-11-28T10:00:00.000+0000","ids":[["0AT1","2026-11-28T10:00:00.000+0000"]]}`, true},
		{salesforce.CheckELFCheckpoint, `2026-11-28T10:00:00Z`, false},
		{salesforce.CheckELFCheckpoint, `{"last_created":"2026-11-28T10:00:00Z","ids":"x"}`, false},
		{salesforce.CheckELFCheckpoint, `{"last_created":"2026-11-28T10:00:00Z","ids":[],"interval":"Hourly","interval_since":"2026-11-27T00:00:00Z",` +
			`"interval_earlier":[{"interval":"Daily","since":"2026-11-26T00:00:00Z"}]}`, true},
		{salesforce.CheckELFCheckpoint, `{"last_created":"2026-11-28T10:00:00Z","ids":[],"interval":"Weekly"}`, false},
		{salesforce.CheckELFCheckpoint, `{"last_created":"2026-11-28T10:00:00Z","ids":[],"interval":"Hourly",` + // earlier without since
			`"interval_earlier":[{"interval":"Daily","since":"2026-11-26T00:00:00Z"}]}`, false},
		{salesforce.CheckELFCheckpoint, `{"last_created":"2026-11-28T10:00:00Z","ids":[],"interval":"Hourly","interval_since":"2026-11-27T00:00:00Z",` + // not alternating
			`"interval_earlier":[{"interval":"Hourly","since":"2026-11-26T00:00:00Z"}]}`, false},
		{salesforce.CheckELFCheckpoint, `{"last_created":"2026-11-28T10:00:00Z","ids":[],"interval":"Hourly","interval_since":"2026-11-27T00:00:00Z",` + // not in time order
			`"interval_earlier":[{"interval":"Daily","since":"2026-11-27T00:00:00Z"}]}`, false},
	} {
		err := tc.check(tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok=%v", tc.value, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "like") {
			t.Errorf("%q: the error shows no example of a valid value: %v", tc.value, err)
		}
	}
}

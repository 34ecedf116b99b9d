package pubsub_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loginStream is an in-process Pub/Sub API holding n LoginEventStream
// events, one a millisecond from the returned time, and an authenticator
// for it.
func loginStream(b *testing.B, n int) (*fakepubsub.Server, *salesforce.Auth, time.Time) {
	b.Helper()
	srv := fakepubsub.Start(b)
	srv.AddTopic(fakepubsub.LoginTopic, fakepubsub.LoginEventStreamSchema)
	at := time.Now()
	for i := range n {
		srv.Append(fakepubsub.LoginTopic, fakepubsub.LoginEvent(i, at.Add(time.Duration(i)*time.Millisecond)))
	}
	web := httptest.NewServer(&fakesf.Org{})
	b.Cleanup(web.Close)
	auth, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: web.URL, ClientID: "ck", ClientSecret: "x", OrgID: "00D000000000001"})
	if err != nil {
		b.Fatal(err)
	}
	return srv, auth, at
}

// BenchmarkSourceEvents is the source alone on 20,000 LoginEventStream
// events of the in-process Pub/Sub API (gRPC, protobuf, the Avro payload
// to its line, time and level), without the pipeline: events/s, and with
// -cpuprofile where a Pub/Sub event's time goes before the push.
func BenchmarkSourceEvents(b *testing.B) {
	const n = 20_000
	srv, auth, _ := loginStream(b, n)
	spec := pubsub.Spec{Topics: []string{fakepubsub.LoginTopic}, ReplayPreset: pubsub.Earliest, Endpoint: srv.Addr, Plaintext: true}
	cpu := processCPU()
	for b.Loop() {
		src, err := pubsub.New(auth, spec, clock.New(), slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(b.Context())
		got := 0
		err = src.Run(ctx, func(string) (string, bool) { return "", false }, func(e ports.Entry) error {
			if !e.CheckpointOnly {
				if got++; got == n {
					cancel()
				}
			}
			return nil
		})
		cancel()
		if got < n {
			b.Fatalf("%d of %d events: %v", got, n, err)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
	// The process's CPU time (the fake server's included) is steadier than
	// the wall time on a machine other work shares.
	b.ReportMetric(float64(processCPU()-cpu)/float64(n*b.N), "cpu-ns/event")
}

// BenchmarkSourceEventsOverEventLogFile compares the two sources alone,
// without the pipeline, on rows of similar size: n LoginEventStream events
// (304-byte lines) through the in-process Pub/Sub API, and a Login
// EventLogFile of as many rows (317-byte lines) through the in-process
// REST API, one after the other in each round, each timed from its start
// (login and connection included). It reports each source's
// entries/s and the process's CPU per entry (the fakes' included), and
// Pub/Sub ÷ EventLogFile in entries/s: the decode paths' ratio, which the
// daemon's (test/integration BenchmarkPubSubOverEventLogFile) adds the
// Pub/Sub API's 100-event flow-control window and the push to.
func BenchmarkSourceEventsOverEventLogFile(b *testing.B) {
	const n = 100_000
	srv, auth, at := loginStream(b, n)
	org := &fakesf.ELFOrg{}
	org.Add("0AT1", "Login", at.Add(-time.Hour), fakesf.LoginEventLogFile(n))
	rest := httptest.NewServer(org)
	b.Cleanup(rest.Close)
	elfAuth, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: rest.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	// drain runs one source until it emitted n entries: its seconds and
	// the process's CPU time.
	drain := func(run func(ctx context.Context, emit func(ports.Entry) error) error) (time.Duration, time.Duration) {
		ctx, cancel := context.WithCancel(b.Context())
		defer cancel()
		got := 0
		start, cpu := time.Now(), processCPU()
		err := run(ctx, func(e ports.Entry) error {
			if !e.CheckpointOnly && e.Line != "" {
				if got++; got == n {
					cancel()
				}
			}
			return nil
		})
		took, used := time.Since(start), processCPU()-cpu
		if got < n || (err != nil && !errors.Is(err, context.Canceled)) {
			b.Fatalf("%d of %d entries: %v", got, n, err)
		}
		return took, used
	}
	none := func(string) (string, bool) { return "", false }
	var elfWall, elfCPU, psWall, psCPU time.Duration
	for b.Loop() {
		elf, err := salesforce.NewELFSource(elfAuth, "60.0", salesforce.ELFSpec{Interval: "Hourly", EventTypes: []string{"Login"}, PollInterval: time.Hour}, clock.New(), log)
		if err != nil {
			b.Fatal(err)
		}
		w, c := drain(func(ctx context.Context, emit func(ports.Entry) error) error { return elf.Run(ctx, none, emit) })
		elfWall, elfCPU = elfWall+w, elfCPU+c
		runtime.GC() // the file's garbage is not the stream's to collect
		ps, err := pubsub.New(auth, pubsub.Spec{Topics: []string{fakepubsub.LoginTopic}, ReplayPreset: pubsub.Earliest, Endpoint: srv.Addr, Plaintext: true}, clock.New(), log)
		if err != nil {
			b.Fatal(err)
		}
		w, c = drain(func(ctx context.Context, emit func(ports.Entry) error) error { return ps.Run(ctx, none, emit) })
		_ = ps.Close()
		psWall, psCPU = psWall+w, psCPU+c
	}
	total := float64(n * b.N)
	b.ReportMetric(total/elfWall.Seconds(), "elf-rows/s")
	b.ReportMetric(total/psWall.Seconds(), "pubsub-events/s")
	b.ReportMetric(float64(elfCPU.Nanoseconds())/total, "elf-cpu-ns/row")
	b.ReportMetric(float64(psCPU.Nanoseconds())/total, "pubsub-cpu-ns/event")
	b.ReportMetric(elfWall.Seconds()/psWall.Seconds(), "pubsub/elf")
}

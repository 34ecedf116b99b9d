package pubsub_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/internal/ports"
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

// BenchmarkSourceEvents is the source alone on 20,000 LoginEventStream
// events of the in-process Pub/Sub API (gRPC, protobuf, the Avro payload
// to its line, time and level), without the pipeline: events/s, and with
// -cpuprofile where a Pub/Sub event's time goes before the push.
func BenchmarkSourceEvents(b *testing.B) {
	const n = 20_000
	srv := fakepubsub.Start(b)
	srv.AddTopic(fakepubsub.LoginTopic, fakepubsub.LoginEventStreamSchema)
	at := time.Now()
	for i := range n {
		srv.Append(fakepubsub.LoginTopic, fakepubsub.LoginEvent(i, at.Add(time.Duration(i)*time.Millisecond)))
	}
	web := httptest.NewServer(&fakesf.Org{})
	b.Cleanup(web.Close)
	auth, err := salesforce.New(salesforce.Config{AuthMode: salesforce.ClientCredentials, LoginURL: web.URL, ClientID: "ck", ClientSecret: "x", OrgID: "00D000000000001"})
	if err != nil {
		b.Fatal(err)
	}
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

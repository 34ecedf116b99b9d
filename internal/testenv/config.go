package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/config"
)

// Config returns a valid configuration for coordinate type ct with
// short timings.
func Config(ct string) *config.Config {
	c := config.Defaults()
	c.Coordinate.Type = ct
	c.Coordinate.S3Lease.Bucket, c.Coordinate.GCSLease.Bucket = "b", "b"
	c.State.Store = config.StoreS3
	c.State.S3.Bucket = "b"
	c.Service.HealthAddr = "127.0.0.1:0"
	c.Service.ShutdownGrace = 2 * time.Second
	for _, t := range []*config.LeaseTiming{&c.Coordinate.FileLease.LeaseTiming, &c.Coordinate.S3Lease.LeaseTiming, &c.Coordinate.GCSLease.LeaseTiming} {
		t.TTL, t.RenewInterval, t.HolderID = 3*time.Second, 500*time.Millisecond, "test-holder"
	}
	c.Coordinate.K8sLease.LeaseDuration, c.Coordinate.K8sLease.RenewInterval, c.Coordinate.K8sLease.Identity = 3*time.Second, 500*time.Millisecond, "test-holder"
	return c
}

// PrintedLines decodes stdout, which must hold JSON lines only.
func PrintedLines(t *testing.T, stdout string) []loki.Printed {
	t.Helper()
	var out []loki.Printed
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var p loki.Printed
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("stdout holds a line that is not an entry (%v): %q", err, sc.Text())
		}
		if _, err := time.Parse(time.RFC3339Nano, p.Time); err != nil || p.Line == "" || p.Labels == nil || p.Metadata == nil {
			t.Fatalf("an incomplete entry: %q", sc.Text())
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		t.Fatal("the dry run printed nothing")
	}
	return out
}

package app

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Durations are logged as text (5m0s), in groups and in a logger's own
// attributes too, in both formats: the JSON handler alone writes nanoseconds.
func TestLogsWriteDurationsAsText(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		log := NewLogger(&buf, "info", format).With("grace", 25*time.Second)
		log.WithGroup("lease").Info("stopped", "drained_for", 1200*time.Millisecond,
			slog.Group("poll", slog.Duration("every", 5*time.Minute)), "count", 3)
		out := buf.String()
		for _, want := range map[string][]string{
			"json": {`"grace":"25s"`, `"lease":{"drained_for":"1.2s","poll":{"every":"5m0s"},"count":3}`},
			"text": {"grace=25s", "lease.drained_for=1.2s", "lease.poll.every=5m0s", "lease.count=3"},
		}[format] {
			if !strings.Contains(out, want) {
				t.Errorf("%s: missing %s in %s", format, want, out)
			}
		}
	}
}

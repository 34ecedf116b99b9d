package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/app"
)

// config migrate prints the rewritten file on stdout and the report on
// stderr; a key it cannot carry over exits 2 with nothing on stdout.
func TestConfigMigrateCommand(t *testing.T) {
	run := func(yaml string) (stdout, stderr string, err error) {
		p := filepath.Join(t.TempDir(), "old.yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		root := NewRootCommand()
		var out, errb bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errb)
		root.SetArgs([]string{"config", "migrate", "--config", p})
		err = root.Execute()
		return out.String(), errb.String(), err
	}
	out, report, err := run("# the sink\nsink:\n  type: loki\n  loki:\n    url: http://loki:3100/loki/api/v1/push\n    batch: {queue_maxsize: 500} # smaller\n")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "# the sink") || !strings.Contains(out, "queue_entries: 500} # smaller") || strings.Contains(out, "type: loki") {
		t.Errorf("stdout:\n%s", out)
	}
	for _, want := range []string{"renamed:\n  sink.loki.batch.queue_maxsize: the older spelling of sink.loki.batch.queue_entries", "dropped:\n  sink.type", "defaults and behaviour that differ"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	out, report, err = run("sources: {eventlogfile: {enabled: true, event_types: [API], timestamp_column: TIMESTAMP}}\n")
	var ee *app.ExitError
	if !errors.As(err, &ee) || ee.Code != app.ExitInvalidConfig || out != "" || !strings.Contains(report, "refused") || !strings.Contains(report, "timestamp_column") {
		t.Errorf("a refused key: err %v, stdout %q, report %q", err, out, report)
	}
}

package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// BenchmarkEventLogFileDaemon runs the built daemon on one EventLogFile
// served by an in-process org and reports the rows/s from the daemon's
// start to the Loki peer accepting the last row, and the daemon's peak
// resident set (VmHWM) over the run. The 50MB file is 450,000 rows; the
// 150MB one shows the peak does not grow with the file. The peer is
// VictoriaLogs; ELF_NULL_PEER=1 pushes to a peer that discards the bodies,
// which measures the daemon alone. `make bench-elf` runs it.
func BenchmarkEventLogFileDaemon(b *testing.B) {
	logs := testenv.StartLogs(b)
	push, peer := logs.PushURL, "VictoriaLogs"
	if os.Getenv("ELF_NULL_PEER") != "" {
		null := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusNoContent)
		}))
		defer null.Close()
		push, peer = null.URL+"/loki/api/v1/push", "a discarding peer"
	}
	for _, rows := range []int{450_000, 1_350_000} {
		body := fakesf.APIEventLogFile(rows)
		b.Run(fmt.Sprintf("%.0fMiB", float64(len(body))/(1<<20)), func(b *testing.B) {
			var secs, peak float64
			runs := 0
			for b.Loop() {
				runs++
				s, p := ingestELF(b, body, rows, push, fmt.Sprintf("elfbench%d-%d", rows, runs))
				secs += s
				peak = max(peak, p)
			}
			b.ReportMetric(float64(rows*runs)/secs, "rows/s")
			b.ReportMetric(peak, "peak-RSS-MiB")
			b.ReportMetric(float64(len(body))/(1<<20), "file-MiB")
			b.Logf("%d rows (%.1f MiB) into %s: %.0f rows/s, peak RSS %.1f MiB", rows, float64(len(body))/(1<<20), peer, float64(rows*runs)/secs, peak)
		})
	}
}

// ingestELF runs one daemon until the peer has accepted rows entries and
// returns the seconds that took and the daemon's peak RSS in MiB.
func ingestELF(b *testing.B, body string, rows int, push, job string) (secs, peakMiB float64) {
	org := &fakesf.ELFOrg{}
	org.Add("0AT1", "API", time.Now().Add(-time.Hour), body)
	srv := httptest.NewServer(org)
	defer srv.Close()
	cfg := fmt.Sprintf(`state: {file: {path: %s/state.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret}
sources: {eventlogfile: {event_types: [API], poll_interval: 1h, settle_window: 0s}}
sink: {loki: {url: %s, labels: {job: %s}}}
`, b.TempDir(), srv.URL, push, job)
	d := start(b, job, cfg)
	for {
		m, err := d.metrics(quick)
		if err == nil && m["sf2loki_loki_entries_pushed_total"] >= float64(rows) {
			break
		}
		if d.exited() || time.Since(d.started) > 5*time.Minute {
			b.Fatalf("%s: %v pushed after %s (exited %v)", d.name, m["sf2loki_loki_entries_pushed_total"], time.Since(d.started), d.exited())
		}
		time.Sleep(20 * time.Millisecond)
	}
	secs = time.Since(d.started).Seconds()
	peakMiB = float64(procStatusKiB(b, d.cmd.Process.Pid, "VmHWM")) / 1024
	d.signal(b, syscall.SIGTERM)
	d.waitExit(b, 30*time.Second)
	return secs, peakMiB
}

// procStatusKiB reads one KiB field (VmRSS, VmHWM) of /proc/<pid>/status.
func procStatusKiB(b testing.TB, pid int, field string) int {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.Atoi(strings.Fields(v)[0])
			return kb
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

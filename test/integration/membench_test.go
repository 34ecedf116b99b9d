package integration

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// BenchmarkSaturatedLanes measures the resident set the container limits
// must hold: the built daemon with both lanes full at the default sizing.
// One EventLogFile (bulk lane) and one Pub/Sub topic (realtime lane) each
// hold more than a lane's queue_bytes of wide entries (MEM_FIELD_BYTES,
// 8 KiB a field by default, so the 64 MiB byte bound binds before the
// 10,000-entry one), and the Loki peer holds every push unanswered for
// MEM_HOLD (20s): the sources fill both lanes, max_in_flight pushes per
// lane wait in the air, and nothing is freed. Then the peer accepts
// everything and the run ends when every entry is pushed. It reports the
// peak RSS (VmHWM) while held and over the whole run, the largest of the
// runs (-benchtime 3x runs three). GOMEMLIMIT set in
// the environment reaches the daemon, so the same command shows a soft
// limit's effect, and DAEMON_EXTRA_YAML other lane sizes. `make
// bench-memory` runs it.
func BenchmarkSaturatedLanes(b *testing.B) {
	field := benchEnvInt(b, "MEM_FIELD_BYTES", 8<<10)
	hold := 20 * time.Second
	if v := os.Getenv("MEM_HOLD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("MEM_HOLD: %v", err)
		}
		hold = d
	}
	// Each source holds 1.5 lanes' worth, so both lanes fill whatever the
	// per-entry overhead.
	n := (96 << 20) / field
	// Incompressible padding, as real fields are to snappy: the encoded
	// pushes in the air weigh what the arithmetic says.
	pad := make([]byte, field*3/4)
	_, _ = rand.Read(pad)
	wide := base64.StdEncoding.EncodeToString(pad)[:field]

	var elf strings.Builder
	elf.WriteString("EVENT_TYPE,TIMESTAMP_DERIVED,USER_ID,URI,QUERY\r\n")
	for i := range n {
		ms := int64(i) * 3_600_000 / int64(n)
		fmt.Fprintf(&elf, "API,2026-11-28T10:%02d:%02d.%03dZ,005%012d,/services/data/v60.0/query,\"%d %s\"\r\n", ms/60_000, ms/1000%60, ms%1000, i, i, wide)
	}
	org := &fakesf.ELFOrg{}
	org.Add("0AT1", "API", time.Now().Add(-time.Hour), elf.String())
	web := httptest.NewServer(org)
	defer web.Close()

	ps := fakepubsub.Start(b)
	ps.AddTopic(fakepubsub.LoginTopic, fakepubsub.LoginEventStreamSchema)
	at := time.Now().Add(-time.Hour)
	for i := range n {
		ev := fakepubsub.LoginEvent(i, at.Add(time.Duration(i)*time.Millisecond))
		ev["AdditionalInfo"] = fmt.Sprintf(`{"n":%d,"pad":%q}`, i, wide)
		ps.Append(fakepubsub.LoginTopic, ev)
	}

	var heldMax, peakMax float64
	for b.Loop() {
		peer := &holdingPeer{release: make(chan struct{})}
		srv := httptest.NewServer(peer)
		cfg := fmt.Sprintf(`state: {file: {path: %s/state.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret, org_id: 00D000000000001}
sources:
  eventlogfile: {event_types: [API], poll_interval: 1h, settle_window: 0s}
  pubsub: {topics: [%s], replay_preset: EARLIEST, endpoint: %q, plaintext: true}
sink: {loki: {url: %s/loki/api/v1/push, labels: {job: membench}}}
`, b.TempDir(), web.URL, fakepubsub.LoginTopic, ps.Addr, srv.URL)
		cfg, extra := withExtraConfig(b, cfg)
		var env []string
		if v := os.Getenv("GOMEMLIMIT"); v != "" {
			env = append(env, "GOMEMLIMIT="+v)
		}
		sentBefore := ps.Sent()
		d := start(b, "membench", cfg, env...)
		time.Sleep(hold)
		if d.exited() {
			b.Fatalf("the daemon exited while the peer held its pushes")
		}
		heldPeak := float64(procStatusKiB(b, d.cmd.Process.Pid, "VmHWM")) / 1024
		heldRSS := float64(procStatusKiB(b, d.cmd.Process.Pid, "VmRSS")) / 1024
		sent, waiting := ps.Sent()-sentBefore, peer.waiting.Load()
		close(peer.release)
		if waiting != 32 {
			b.Errorf("%d pushes waiting at the peer, want 32 (max_in_flight 16 on each lane): the lanes were not saturated", waiting)
		}
		for {
			m, err := d.metrics(quick)
			if err == nil && m["sf2loki_loki_entries_pushed_total"] >= float64(2*n) {
				break
			}
			if d.exited() || time.Since(d.started) > hold+5*time.Minute {
				b.Fatalf("%v of %d entries pushed after %s (exited %v)", m["sf2loki_loki_entries_pushed_total"], 2*n, time.Since(d.started), d.exited())
			}
			time.Sleep(50 * time.Millisecond)
		}
		peak := float64(procStatusKiB(b, d.cmd.Process.Pid, "VmHWM")) / 1024
		d.signal(b, syscall.SIGTERM)
		d.waitExit(b, 30*time.Second)
		srv.Close()
		heldMax, peakMax = max(heldMax, heldPeak), max(peakMax, peak)
		b.Logf("%d EventLogFile rows and %d Pub/Sub events of %d-byte fields (%.0f MiB each); held %s: RSS %.1f MiB, peak %.1f MiB, %d pushes waiting at the peer, %d events sent by Pub/Sub (%.0f MiB); drained: peak RSS %.1f MiB (GOMEMLIMIT=%q%s)",
			n, n, field, float64(n*field)/(1<<20), hold, heldRSS, heldPeak, waiting, sent, float64(sent*field)/(1<<20), peak, os.Getenv("GOMEMLIMIT"), withDesc(extra))
	}
	// The largest of the runs: a limit must hold the worst one.
	b.ReportMetric(heldMax, "held-peak-RSS-MiB")
	b.ReportMetric(peakMax, "peak-RSS-MiB")
}

// holdingPeer is a Loki push endpoint that reads each push and holds it
// unanswered until release is closed, then accepts everything.
type holdingPeer struct {
	release chan struct{}
	waiting atomic.Int64 // pushes held now
}

func (p *holdingPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-p.release:
	default:
		p.waiting.Add(1)
		select {
		case <-p.release:
		case <-r.Context().Done():
			p.waiting.Add(-1)
			return
		}
		p.waiting.Add(-1)
	}
	w.WriteHeader(http.StatusNoContent)
}

// withDesc is ", with <extra>", or "" without extra configuration.
func withDesc(extra string) string {
	if extra == "" {
		return ""
	}
	return ", with " + extra
}

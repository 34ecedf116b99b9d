// Package integration runs the built sf2loki binary as several OS processes
// against real backends: the failover matrix, fault injection between the
// daemons and the stores, the chaos soak, the noop instance lock and the
// check command.
package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// slack absorbs process start-up and scheduling on a busy machine in upper
// bounds only.
const slack = 4 * time.Second

// binary is the sf2loki binary under test.
func binary(t testing.TB) string { return testenv.Sf2loki(t) }

// daemon is one running sf2loki process.
type daemon struct {
	name    string
	addr    string
	cmd     *exec.Cmd
	out     *testenv.Buffer
	started time.Time
	done    chan struct{} // closed when the process has exited
	err     error         // its exit error, once done is closed
	// signalled is set when the test stopped the process on purpose.
	signalled bool
}

// start runs `sf2loki run` with cfg (YAML) and env.
func start(t testing.TB, name, cfg string, env ...string) *daemon {
	t.Helper()
	port := testenv.FreePort(t)
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &daemon{name: name, addr: fmt.Sprintf("127.0.0.1:%d", port), out: &testenv.Buffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(binary(t), "run", "--config", path)
	// The daemon refuses unknown SF2LOKI_ variables: pass only the test's.
	inherited := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SF2LOKI_") })
	inherited = append(inherited, env...)
	inherited = append(inherited, "SF2LOKI_SERVICE__HEALTH_ADDR="+d.addr, "SF2LOKI_SERVICE__LOG_FORMAT=text")
	d.cmd.Env = inherited
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	d.started = time.Now()
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGCONT)
		_ = d.cmd.Process.Kill()
		<-d.done
		if t.Failed() {
			t.Logf("--- %s output ---\n%s", d.name, d.out.String())
		}
	})
	return d
}

// signal sends sig; the test meant it, so the exit is not a failure.
func (d *daemon) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		d.signalled = true
	}
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %s: %v", d.name, sig, err)
	}
}

// exited reports whether the process has exited.
func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// waitExit waits for the process to exit after a SIGTERM and fails unless it
// exited 0.
func (d *daemon) waitExit(t testing.TB, limit time.Duration) {
	t.Helper()
	select {
	case <-d.done:
		if d.err != nil {
			t.Fatalf("%s exited with %v after SIGTERM, want 0", d.name, d.err)
		}
	case <-time.After(limit):
		t.Fatalf("%s did not exit within %s of SIGTERM", d.name, limit)
	}
}

var client = &http.Client{Timeout: time.Second}

// quick is the sampler's client: a paused process must not stall a sample.
var quick = &http.Client{Timeout: 300 * time.Millisecond}

func (d *daemon) readyz() (int, string) {
	resp, err := client.Get("http://" + d.addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// metrics returns the process's Prometheus samples by name with labels, as
// `name{label="v",...}` → value.
func (d *daemon) metrics(c *http.Client) (map[string]float64, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+d.addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	// Uncompressed: the benchmarks sample every 20ms, and compressing
	// each page would be charged to the daemon's CPU per entry.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[dropOTelScope(line[:i])] = v
	}
	return out, sc.Err()
}

// dropOTelScope removes the otel_scope_* labels the exporter adds, so tests
// can name a series by its own labels.
func dropOTelScope(series string) string {
	name, labels, ok := strings.Cut(series, "{")
	if !ok {
		return series
	}
	var keep []string
	for l := range strings.SplitSeq(strings.TrimSuffix(labels, "}"), ",") {
		if l != "" && !strings.HasPrefix(l, "otel_scope_") {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		return name
	}
	return name + "{" + strings.Join(keep, ",") + "}"
}

// metric returns one series' value (0 when absent, as for a counter that
// has not counted yet).
func (d *daemon) metric(t testing.TB, series string) float64 {
	t.Helper()
	m, err := d.metrics(client)
	if err != nil {
		t.Fatalf("%s: /metrics: %v", d.name, err)
	}
	if _, ok := m["sf2loki_leader"]; !ok {
		t.Fatalf("%s: /metrics lacks sf2loki_leader", d.name)
	}
	return m[series]
}

// status is the part of /statusz the tests read.
type status struct {
	Role          string           `json:"role"`
	Holder        string           `json:"holder"`
	Instance      string           `json:"instance"`
	Epoch         uint64           `json:"epoch"`
	FenceDeadline *time.Time       `json:"fence_deadline"`
	Counters      map[string]int64 `json:"counters"`
}

func (d *daemon) statusz(c *http.Client) (status, error) {
	var st status
	resp, err := c.Get("http://" + d.addr + "/statusz")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// waitReady waits until d answers /readyz with code and body and returns
// how long that took.
func (d *daemon) waitReady(t testing.TB, code int, body string, limit time.Duration) time.Duration {
	t.Helper()
	return d.waitReadySince(t, time.Now(), code, body, limit)
}

// waitReadySince is waitReady measured from since.
func (d *daemon) waitReadySince(t testing.TB, since time.Time, code int, body string, limit time.Duration) time.Duration {
	t.Helper()
	for {
		c, b := d.readyz()
		if c == code && b == body {
			return time.Since(since)
		}
		if d.exited() {
			t.Fatalf("%s exited (%v) while waiting for /readyz %d %q", d.name, d.err, code, body)
		}
		if time.Since(since) > limit {
			t.Fatalf("%s: /readyz %d %q after %s, want %d %q", d.name, c, b, limit, code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logTime returns the time of the first log line (text format) after since
// that contains all of parts.
func (d *daemon) logTime(since time.Time, parts ...string) (time.Time, bool) {
	for line := range strings.Lines(d.out.String()) {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if !ok || !strings.HasPrefix(line, "time=") {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err == nil && !at.Before(since) {
			return at, true
		}
	}
	return time.Time{}, false
}

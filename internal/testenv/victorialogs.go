package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"testing"
	"time"
)

// LogsServer is a running VictoriaLogs: a real log database that accepts
// Loki's push API and can be queried back.
type LogsServer struct {
	// URL is the base URL; PushURL the Loki push endpoint.
	URL     string
	PushURL string
	// Pid is the server's process id.
	Pid int
}

// StartLogs starts VictoriaLogs on a random loopback port and stops it when
// t ends.
func StartLogs(t testing.TB) *LogsServer {
	t.Helper()
	bin := Binary(t, "victoria-logs")
	port := FreePort(t)
	cmd := exec.Command(bin, "-storageDataPath="+t.TempDir(), fmt.Sprintf("-httpListenAddr=127.0.0.1:%d", port),
		"-retentionPeriod=100y", "-futureRetention=100y", "-loki.disableMessageParsing", "-loggerLevel=ERROR")
	out := &Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	s := &LogsServer{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Pid: cmd.Process.Pid}
	s.PushURL = s.URL + "/insert/loki/api/v1/push"
	if err := waitHTTP(s.URL+"/health", exited, 30*time.Second); err != nil {
		t.Fatalf("victoria-logs: %v\n%s", err, out.String())
	}
	return s
}

// Query flushes and runs a LogsQL query, returning one map per log entry.
func (s *LogsServer) Query(t testing.TB, query string) []map[string]string {
	t.Helper()
	resp, err := http.Get(s.URL + "/internal/force_flush")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = http.Get(s.URL + "/select/logsql/query?query=" + url.QueryEscape(query))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query %q: %s", query, resp.Status)
	}
	var out []map[string]string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m map[string]string
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("query result line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

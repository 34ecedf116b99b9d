package app

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

func TestVersionCommand(t *testing.T) {
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"sf2loki " + version, "commit: ", "go: " + runtime.Version()} {
		if !strings.Contains(got, want) {
			t.Errorf("version output %q lacks %q", got, want)
		}
	}
}

func TestVersionRejectsArguments(t *testing.T) {
	root := NewRootCommand()
	root.SetOut(&bytes.Buffer{})
	root.SetArgs([]string{"version", "extra"})
	if err := root.Execute(); err == nil {
		t.Fatal("version accepted a stray argument")
	}
}

func TestHealthCommand(t *testing.T) {
	run := func(url string) (string, error) {
		root := NewRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{"health", "--url", url, "--timeout", "2s"})
		err := root.Execute()
		return out.String(), err
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "standby\n")
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	}))
	defer srv.Close()
	if out, err := run(srv.URL + "/healthz"); err != nil || !strings.Contains(out, ": 200 ok") {
		t.Fatalf("healthy: %q, %v", out, err)
	}
	var exit *ExitError
	if _, err := run(srv.URL + "/readyz"); !errors.As(err, &exit) || exit.Code != 1 || !strings.Contains(err.Error(), "answered 503 standby") {
		t.Fatalf("503: %v", err)
	}
	srv.Close()
	if _, err := run(srv.URL + "/healthz"); !errors.As(err, &exit) || exit.Code != 1 || !strings.Contains(err.Error(), "is sf2loki running") {
		t.Fatalf("nothing listening: %v", err)
	}
}

package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDaemonLinksOnlyWhatItUses: the daemon's binary carries no package it
// has no use for at run time. The Kubernetes lease reaches the API server
// with a REST client for coordination.k8s.io/v1 alone, so neither the
// generated clientset nor the other API groups are linked; wire's provider
// sets are built under the wireinject tag only; only the dashboard
// generator (cmd/dashgen) imports the Grafana SDK; nothing of the tests' is
// imported.
func TestDaemonLinksOnlyWhatItUses(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no go command on the PATH, which CI must have")
		}
		t.Skip("no go command")
	}
	out, err := exec.Command(goBin, "list", "-deps", "github.com/sf2loki/sf2loki/cmd/sf2loki").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(pkg, "k8s.io/client-go/kubernetes"),
			strings.HasPrefix(pkg, "k8s.io/api/") && pkg != "k8s.io/api/coordination/v1",
			strings.HasPrefix(pkg, "github.com/google/gnostic-models/"),
			pkg == "github.com/google/wire",
			strings.HasPrefix(pkg, "github.com/grafana/grafana-foundation-sdk/"),
			pkg == "github.com/sf2loki/sf2loki/internal/dashboards",
			pkg == "testing", strings.HasPrefix(pkg, "net/http/httptest"),
			strings.HasPrefix(pkg, "github.com/sf2loki/sf2loki/internal/testenv"):
			t.Errorf("cmd/sf2loki depends on %s", pkg)
		}
	}
}

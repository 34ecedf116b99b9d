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
// imported; and, built with the tag every build of the daemon passes
// (buildTags), the GCS client's gRPC DirectPath (xDS, Envoy's API, RLS) is
// left out: the GCS store reads and writes over the JSON API.
func TestDaemonLinksOnlyWhatItUses(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no go command on the PATH, which CI must have")
		}
		t.Skip("no go command")
	}
	out, err := exec.Command(goBin, "list", "-tags", buildTags, "-deps", "github.com/sf2loki/sf2loki/cmd/sf2loki").CombinedOutput()
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
			strings.HasPrefix(pkg, "google.golang.org/grpc/xds"),
			// gRPC's Google credentials ask internal/xds (and its
			// clients' names) whether a target is xDS; the rest of it is
			// DirectPath's.
			strings.HasPrefix(pkg, "google.golang.org/grpc/internal/xds/") && pkg != "google.golang.org/grpc/internal/xds/clients",
			strings.HasPrefix(pkg, "google.golang.org/grpc/balancer/rls"),
			strings.HasPrefix(pkg, "github.com/envoyproxy/"),
			strings.HasPrefix(pkg, "github.com/cncf/xds/"),
			strings.HasPrefix(pkg, "github.com/sf2loki/sf2loki/internal/testenv"):
			t.Errorf("cmd/sf2loki depends on %s", pkg)
		}
	}
}

// buildTags are the tags every build of the daemon passes.
const buildTags = "disable_grpc_modules"

// TestEveryBuildPassesTheTags: make build, the image, the release, make
// size and the tests' own build of the daemon all pass buildTags, so none
// of them ships or measures a binary with the DirectPath packages.
func TestEveryBuildPassesTheTags(t *testing.T) {
	for file, want := range map[string]string{
		"../../Makefile":                    "BUILD_TAGS := " + buildTags,
		"../../Dockerfile":                  "go build -tags " + buildTags + " ",
		"../../.goreleaser.yaml":            "- -tags=" + buildTags + "\n",
		"../../scripts/size.sh":             "TAGS=" + buildTags + " ",
		"../../internal/testenv/sf2loki.go": `"build", "-tags", "` + buildTags + `"`,
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s does not build with the tags (%q)", file, want)
		}
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mk), "\n") {
		if strings.Contains(line, "go) build") && !strings.Contains(line, "-tags $(BUILD_TAGS)") {
			t.Errorf("the Makefile builds without the tags: %s", strings.TrimSpace(line))
		}
	}
}

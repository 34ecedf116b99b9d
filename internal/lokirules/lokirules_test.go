package lokirules_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/lokirules"
)

// TestStaticLabelsAreAllowedLessPerSource: what the configuration may set
// is exactly what the sink accepts less what each source sets.
func TestStaticLabelsAreAllowedLessPerSource(t *testing.T) {
	want := []string{"job", "service_name", "sf_org_id", "environment", "org"}
	if !slices.Equal(lokirules.StaticLabels, want) {
		t.Fatalf("StaticLabels = %v, want %v", lokirules.StaticLabels, want)
	}
	for _, l := range lokirules.AllowedLabels {
		if lokirules.IsStatic(l) == slices.Contains(lokirules.PerSourceLabels, l) {
			t.Errorf("label %q: static %v, per source %v", l, lokirules.IsStatic(l), slices.Contains(lokirules.PerSourceLabels, l))
		}
	}
	if lokirules.IsStatic("user_id") {
		t.Error("user_id is not an allowed label, so not a static one")
	}
}

func TestHeaderProblem(t *testing.T) {
	for _, c := range []struct {
		name, value  string
		tenant, auth bool
		bad          bool
	}{
		{"X-Team", "sec", false, false, false},
		{"Authorization", "Bearer x", false, false, false},
		{"Authorization", "Bearer x", false, true, true},
		{"X-Scope-OrgID", "t1", false, false, false},
		{"x-scope-orgid", "t1", true, false, true},
		{"content-type", "text/plain", false, false, true},
		{"Content-Length", "1", false, false, true},
		{"Bad Name", "v", false, false, true},
		{"X-Line", "a\r\nInjected: 1", false, false, true},
		{"X-Tab", "a\tb", false, false, false},
	} {
		p := lokirules.HeaderProblem(c.name, c.value, c.tenant, c.auth)
		if (p != "") != c.bad {
			t.Errorf("HeaderProblem(%q, %q, tenant %v, auth %v) = %q, want a problem: %v", c.name, c.value, c.tenant, c.auth, p, c.bad)
		}
		if p != "" && c.value != "" && len(c.value) > 2 && strings.Contains(p, c.value) {
			t.Errorf("HeaderProblem quotes the value %q: %s", c.value, p)
		}
	}
}

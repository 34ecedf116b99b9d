package doctor

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

func TestDoctorChecksTheTransforms(t *testing.T) {
	dir := t.TempDir()
	base := "state: {store: file, file: {path: " + filepath.Join(dir, "state.json") + "}}\n"
	row := func(yaml string) (Check, Report) {
		t.Helper()
		r := Doctor(t.Context(), testenv.WriteConfig(t, base+yaml))
		for _, c := range r.Checks {
			if c.Name == "transforms" {
				return c, r
			}
		}
		t.Fatalf("no transforms row: %+v", r.Checks)
		return Check{}, r
	}
	if c, _ := row(""); c.Status != Skip {
		t.Fatalf("no transforms: %+v", c)
	}
	c, r := row("sources: {pubsub: {transforms: [{action: hash, fields: [UserId]}]}}\n")
	if c.Status != Warn || !strings.Contains(c.Detail, config.UnsaltedHashAdvice) {
		t.Fatalf("unsalted: %+v", c)
	}
	for _, other := range r.Checks {
		if other.Name == "config" && strings.Contains(other.Detail, config.UnsaltedHashAdvice) {
			t.Fatalf("the warning is printed twice: %+v", r.Checks)
		}
	}
	if c, r := row("sources: {transform_salt_file: " + filepath.Join(dir, "absent") + ", eventlogfile: {transforms: [{action: hash, fields: [USER_ID]}]}}\n"); c.Status != Fail ||
		!strings.Contains(c.Detail, "transform_salt_file") || r.ExitCode != 1 {
		t.Fatalf("unreadable salt file: %+v (exit %d)", c, r.ExitCode)
	}
	if c, _ := row("sources: {transform_salt: pepper-pepper-pepper, eventlogfile: {sample: {API: 0.5}, transforms: [{action: hash, fields: [USER_ID]}]}}\n"); c.Status != Pass ||
		c.Detail != "1 rules compile; hashes keyed by transform_salt" {
		t.Fatalf("salted: %+v", c)
	}
}

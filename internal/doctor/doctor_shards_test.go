package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// doctorOnAlphasDocument runs doctor on a file-lease configuration with
// orgs first and second, whose configured checkpoint document is stamped
// as org alpha's (epoch 3, one checkpoint).
func doctorOnAlphasDocument(t *testing.T, first, second string) Report {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.json"),
		[]byte(`{"`+domain.FenceEpochKey+`":"3","`+domain.OrgKey+`":"alpha","synthetic:x":"42"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return Doctor(t.Context(), testenv.WriteConfig(t, fmt.Sprintf(`coordinate: {type: file_lease, file_lease: {path: %s/leader.lease}}
state: {file: {path: %s/state.json}}
orgs:
  - name: %s
  - name: %s
`, dir, dir, first, second)))
}

// doctor with orgs: the first org's checkpoint document is stamped with
// another org (the orgs were reordered). The daemon refuses to start
// (ErrWrongOrg); doctor, whose job is to say so beforehand, fails it.
func TestDoctorFailsAReorderedFirstOrg(t *testing.T) {
	r := doctorOnAlphasDocument(t, "beta", "alpha")
	found := false
	for _, c := range r.Checks {
		if strings.HasSuffix(c.Name, "[org beta]") && c.Status != Pass && c.Status != Skip &&
			(strings.Contains(c.Detail, "alpha") || strings.Contains(c.Detail, domain.OrgKey)) {
			found = true
		}
	}
	if !found {
		var lines []string
		for _, c := range r.Checks {
			lines = append(lines, fmt.Sprintf("%s %s: %s", c.Name, c.Status, c.Detail))
		}
		t.Errorf("doctor says nothing about beta's checkpoint document belonging to alpha:\n%s", strings.Join(lines, "\n"))
	}
}

// doctor with orgs and leases checks every org's lease and document, but
// not the members document the balance rests on (it has its own object and
// permissions: dir/shards/members.json, the Lease <name>-members). A
// replica that cannot read or write it sees only itself and never
// balances; doctor says so before the first start.
func TestDoctorChecksTheMembersDocument(t *testing.T) {
	dir := t.TempDir()
	// The members document's path is a directory: unreadable, unwritable.
	if err := os.MkdirAll(filepath.Join(dir, "shards", "members.json"), 0o750); err != nil {
		t.Fatal(err)
	}
	r := Doctor(t.Context(), testenv.WriteConfig(t, fmt.Sprintf(`coordinate: {type: file_lease, file_lease: {path: %s/leader.lease}}
state: {file: {path: %s/state.json}}
orgs:
  - name: alpha
  - name: beta
`, dir, dir)))
	var lines []string
	for _, c := range r.Checks {
		if strings.Contains(c.Name, "member") || strings.Contains(c.Detail, "members.json") {
			if c.Status == Fail {
				return
			}
		}
		lines = append(lines, fmt.Sprintf("%s %s: %s", c.Name, c.Status, c.Detail))
	}
	t.Errorf("doctor (exit %d) has no failing check of the members document %s/shards/members.json (a directory here):\n%s",
		r.ExitCode, dir, strings.Join(lines, "\n"))
}

// doctor's state row does not count __org__ as a checkpoint.
func TestDoctorDoesNotCountTheOrgStamp(t *testing.T) {
	r := doctorOnAlphasDocument(t, "alpha", "beta")
	for _, c := range r.Checks {
		if c.Name == "state [org alpha]" && !strings.Contains(c.Detail, "holds 1 checkpoints") {
			t.Errorf("%s: %s; the document holds one checkpoint (synthetic:x) besides the reserved keys", c.Name, c.Detail)
		}
	}
}

package config

import (
	"strings"
	"testing"
)

// TestIdleRulesNameKeys: every rule names a section or key of the schema,
// and every exception a key or section under it, so a renamed key cannot
// leave a rule that silently matches nothing.
func TestIdleRulesNameKeys(t *testing.T) {
	known := fieldsByPath()
	for _, r := range idleRules {
		if _, ok := known[r.path]; !ok {
			t.Errorf("rule %s: not a key or section", r.path)
			continue
		}
		for _, e := range r.except {
			if _, ok := known[r.path+"."+e]; !ok {
				t.Errorf("rule %s: exception %s is not under it", r.path, e)
			}
		}
		if r.org != (strings.HasPrefix(r.path, "salesforce") || strings.HasPrefix(r.path, "sources")) {
			t.Errorf("rule %s: org is %v", r.path, r.org)
		}
	}
}

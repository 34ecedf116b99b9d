package sfrules_test

import (
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/sfrules"
)

func TestUsernamesAreAConservativeCharset(t *testing.T) {
	for u, ok := range map[string]bool{
		"ops@acme.com": true, "first.last+ci@sub.acme-corp.co.uk": true, "a_b-c@x.sandbox": true,
		"":                                 false,
		"ops":                              false,
		"o'brien@acme.com":                 false,
		"ops@acme.com' OR '1'":             false,
		"a@b@c":                            false,
		"ops @acme.com":                    false,
		`ops\@acme.com`:                    false,
		strings.Repeat("a", 80) + "@x.com": false,
	} {
		if sfrules.ValidUsername(u) != ok {
			t.Errorf("ValidUsername(%q) = %v", u, !ok)
		}
	}
}

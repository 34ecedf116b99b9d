package shape_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain/shape"
)

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		match      bool
	}{
		{"API", "API", true},
		{"API", "api", false},
		{"API", "APIX", false},
		{"*", "", true},
		{"*", "/event/LoginEventStream", true},
		{"**", "x", true},
		{"/event/*", "/event/LoginEventStream", true},
		{"*EventStream", "/event/ApiEventStream", true},
		{"*Api*", "/event/ApiEventStream", true},
		{"*Api*", "/event/LoginEventStream", false},
		{"/data/*ChangeEvent", "/data/AccountChangeEvent", true},
		{"*/*", "a/b/c", true}, // * crosses /
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"a*b*c", "abcbc", true},
		{"?", "é", true}, // one character, two bytes
		{"??", "é", false},
		{"*??", "€", false}, // never half of a UTF-8 sequence
		{"*?", "€", true},
		{"2??", "200", true},
		{"2??", "2000", false},
		{"2??", "20", false},
		{"*_IP", "CLIENT_IP", true},
		{"*_IP", "CLIENT_IPV6", false},
		{"USER_*", "USER_", true},
		{"", "", true},
		{"", "x", false},
	} {
		if got := shape.MatchGlob(tc.pattern, tc.s); got != tc.match {
			t.Errorf("%q ~ %q = %v, want %v", tc.pattern, tc.s, got, tc.match)
		}
	}
	if shape.CompileGlob("a*").String() != "a*" || !shape.IsGlob("a?") || shape.IsGlob("a.b") {
		t.Fatal("String or IsGlob")
	}
}

// globRegexp is the glob as a regular expression, for reference.
func globRegexp(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)\A`)
	for _, r := range p {
		switch r {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`\z`)
	return regexp.MustCompile(b.String())
}

// FuzzGlobAgreesWithRegexp checks the glob matcher against the regular
// expression it stands for, on valid UTF-8 (patterns come from
// configuration files).
func FuzzGlobAgreesWithRegexp(f *testing.F) {
	for _, seed := range [][2]string{{"*??", "€"}, {"a*b*c", "abcbc"}, {"*_IP", "CLIENT_IP"}, {"/event/*Stream", "/event/X"}, {"?*?", "ab"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, p, s string) {
		if len(p) > 64 || !utf8Valid(p) || !utf8Valid(s) {
			t.Skip()
		}
		if got, want := shape.MatchGlob(p, s), globRegexp(p).MatchString(s); got != want {
			t.Fatalf("%q ~ %q = %v, the regexp says %v", p, s, got, want)
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

package shape_test

import (
	"encoding/hex"
	"math"
	"net/netip"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain/shape"
)

// FuzzTransformsHideTheValue runs every action on a fuzzed value, as a CSV
// field and as a decoded string and number: nothing panics, and a hashed
// or masked field never comes out as it went in.
func FuzzTransformsHideTheValue(f *testing.F) {
	for _, seed := range []string{"005000000000001", "jane@acme.com", "10.1.2.3", "2001:db8::1", "::ffff:1.2.3.4", "", "***", "@", "a@", "é@ü", "\xff@\xfe", "日本"} {
		f.Add(seed, 1.5)
	}
	s, err := shape.New("fuzz", shape.Config{Salt: "pepper", Rules: []shape.Rule{
		{Action: shape.Hash, Fields: []string{"H", "HN"}},
		{Action: shape.Mask, Fields: []string{"M*"}},
		{Action: shape.RegexReplace, Fields: []string{"R", "RN"}, Pattern: `[0-9]+|é`, Replacement: "#"},
		{Action: shape.DropField, Fields: []string{"D"}},
		{Action: shape.DropRow, Match: map[string]string{"X": "*drop*"}},
	}})
	if err != nil {
		f.Fatal(err)
	}
	p := s.For("API")
	f.Fuzz(func(t *testing.T, v string, n float64) {
		row := map[string]string{"H": v, "M": v, "R": v, "D": v, "X": v}
		kept := p.Strings(row)
		if kept == strings.Contains(v, "drop") {
			t.Fatalf("drop_row kept %v for %q", kept, v)
		}
		if !kept {
			return
		}
		checkHidden(t, v, row["H"], row["M"])
		if _, ok := row["D"]; ok {
			t.Fatal("drop_field left the field")
		}
		rec := map[string]any{"H": v, "HN": n, "M": v, "MN": n, "R": v, "RN": n, "X": v}
		p.Values(rec)
		h, _ := rec["H"].(string)
		m, _ := rec["M"].(string)
		checkHidden(t, v, h, m)
		if hn, _ := rec["HN"].(string); len(hn) != shape.HashLen {
			t.Fatalf("hash of %v: %v", n, rec["HN"])
		}
		if rec["MN"] != "***" {
			t.Fatalf("mask of %v: %v", n, rec["MN"])
		}
		if r, ok := rec["RN"].(float64); ok && r != n && !(math.IsNaN(r) && math.IsNaN(n)) {
			t.Fatalf("regex_replace changed %v into the number %v", n, r)
		}
	})
}

// checkHidden checks a hashed and a masked form of v.
func checkHidden(t *testing.T, v, hashed, masked string) {
	t.Helper()
	if v == "" {
		if hashed != "" || masked != "" {
			t.Fatalf("an empty value became %q / %q", hashed, masked)
		}
		return
	}
	if _, err := hex.DecodeString(hashed); err != nil || len(hashed) != shape.HashLen || hashed == v {
		t.Fatalf("hash of %q: %q", v, hashed)
	}
	switch a, err := netip.ParseAddr(v); {
	case err == nil:
		// An address keeps its network (/24, /48) and nothing else.
		if !strings.HasSuffix(masked, ".x") && !strings.HasSuffix(masked, "::x") || masked == v {
			t.Fatalf("mask of the address %v: %q", a, masked)
		}
	case nothingToHide(v):
	case masked == v || len(v) > 3 && strings.Contains(masked, v):
		t.Fatalf("mask of %q left it in %q", v, masked)
	case masked != "***" && !strings.HasPrefix(masked, "***@"):
		t.Fatalf("mask of %q: %q", v, masked)
	}
	if !utf8ValidOr(v, masked) {
		t.Fatalf("mask of valid UTF-8 %q split a character: %q", v, masked)
	}
}

// utf8ValidOr reports whether out is valid UTF-8 whenever in is.
func utf8ValidOr(in, out string) bool { return !utf8Valid(in) || utf8Valid(out) }

// nothingToHide reports whether v is only asterisks, or only asterisks
// before its last @ (a masked value masks to itself).
func nothingToHide(v string) bool {
	local := v
	if at := strings.LastIndexByte(v, '@'); at >= 0 {
		local = v[:at]
	}
	return strings.Trim(local, "*") == ""
}

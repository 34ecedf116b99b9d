package jsonstr_test

import (
	"encoding/json"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/jsonstr"
)

var awkward = []string{"", "plain", `<script>&amp;</script>`, `quote " and \ backslash`, "tab\tnew\nline\rcr\bbs\fff",
	"\x00\x01\x1f\x7f", "bad utf-8 \xff\xfe end", "line\u2028para\u2029sep", "naïve 日本語 🎉", "\xed\xa0\x80 surrogate"}

// FuzzAppend checks Append against json.Marshal, for a string and for the
// same bytes.
func FuzzAppend(f *testing.F) {
	for _, s := range awkward {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonstr.Append([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("Append(%q) = %s, json.Marshal = %s", s, got[1:], want)
		}
		if got := jsonstr.Append(nil, []byte(s)); string(got) != string(want) {
			t.Fatalf("Append([]byte(%q)) = %s, json.Marshal = %s", s, got, want)
		}
	})
}

package salesforce

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// checkFieldsJSON fails unless appendFieldsJSON writes what json.Marshal
// writes, with an empty key cache and with the one rows has left.
func checkFieldsJSON(t *testing.T, keys *[]string, fields map[string]string) {
	t.Helper()
	want, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	if got := appendFieldsJSON(nil, fields, keys); string(got) != string(want) {
		t.Fatalf("appendFieldsJSON(%q) = %s, want %s", fields, got, want)
	}
	if got := appendFieldsJSON([]byte("x"), fields, new([]string)); string(got) != "x"+string(want) {
		t.Fatalf("appendFieldsJSON(%q) fresh = %s, want x%s", fields, got, want)
	}
}

// The JSON line of a row is json.Marshal's: every byte and the runes
// encoding/json escapes, invalid UTF-8, and rows whose columns differ from
// the previous row's (same count, other names; fewer; none).
func TestFieldsJSONIsJSONMarshal(t *testing.T) {
	var keys []string
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, f := range []map[string]string{
		{"A": "plain", "B": "", "C": "x"},
		{"A": string(all), "B": "\u2028\u2029\u00e9\U0001F600", "C": "\xff\xfe<a href='x'>&amp;</a>\x7f"},
		{"A": "a", "D": "renamed", "C": "c"},
		{"Z": "\\\"\b\f\n\r\t\x00\x1f", "<key&>": "v"},
		{"\xc3": "truncated rune key", "é": "ok"},
		{},
		nil,
		{"A": "again"},
	} {
		checkFieldsJSON(t, &keys, f)
	}
}

func FuzzFieldsJSON(f *testing.F) {
	f.Add("EVENT_TYPE", "API", "QUERY", "SELECT Id\r\nFROM \"A\" <&>")
	f.Add("\xff", "\u2028", "", "\x00")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		var keys []string
		checkFieldsJSON(t, &keys, map[string]string{k1: v1, k2: v2})
		checkFieldsJSON(t, &keys, map[string]string{k2: v1 + v2, k1 + "x": v2})
	})
}

// The entries of a file share their labels and metadata maps; a type that
// promotes a column gives the rows carrying it labels of their own, and one
// that adds metadata columns gives every row metadata of its own. Either
// way each entry holds its row's labels, metadata and JSON line.
func TestELFEntriesShareTheirMaps(t *testing.T) {
	at := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	rows := []Row{
		rowOf([]string{"EVENT_TYPE", "USER_TYPE", "USER_ID"}, "API", "Standard", "005A"),
		rowOf([]string{"EVENT_TYPE", "USER_TYPE", "USER_ID", "ERROR_CODE"}, "API", "", "005B", "E1"),
		rowOf([]string{"EVENT_TYPE", "USER_TYPE", "USER_ID"}, "API", "Guest", ""),
	}
	for _, ts := range []ELFTypeSpec{{}, {Labels: []string{"USER_TYPE"}}, {Metadata: []string{"USER_ID"}}} {
		b := newELFEntries("API", at, "k", "cp", ts)
		var got []map[string]string
		for _, r := range rows {
			e, err := b.entry(r)
			if err != nil {
				t.Fatal(err)
			}
			fields := r.Fields()
			want := map[string]string{"source": "eventlogfile", "event_type": "API"}
			if len(ts.Labels) > 0 && fields["USER_TYPE"] != "" {
				want["USER_TYPE"] = fields["USER_TYPE"]
			}
			wantMeta := map[string]string{"level": Level(func(k string) string { return fields[k] })}
			if len(ts.Metadata) > 0 && fields["USER_ID"] != "" {
				wantMeta["USER_ID"] = fields["USER_ID"]
			}
			line, _ := json.Marshal(fields)
			if !maps.Equal(e.Labels, want) || !maps.Equal(e.Metadata, wantMeta) || e.Line != string(line) || !e.Time.Equal(at) ||
				e.Checkpoint != (ports.Checkpoint{Key: "k", Value: "cp"}) {
				t.Fatalf("%+v: entry %+v, want labels %v metadata %v line %s", ts, e, want, wantMeta, line)
			}
			got = append(got, e.Labels)
		}
		if len(ts.Labels) > 0 {
			got[0]["probe"] = "x"
			if got[1]["probe"] != "" || got[2]["probe"] != "" {
				t.Fatalf("%+v: a row's promoted labels reached another row's", ts)
			}
		}
	}
}

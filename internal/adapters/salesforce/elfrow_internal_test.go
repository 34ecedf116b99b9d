package salesforce

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// rowOf is the row ReadEventLogFile makes of vals under a header of names.
func rowOf(names []string, vals ...string) Row {
	c := newColumns(names)
	r := Row{cols: c, vals: vals}
	r.Time = rowTime(r.at(c.derived), r.at(c.stamp))
	return r
}

// mapRow is the row as a map filled in column order (a name written twice
// keeps its last column's value) and the time read from that map: what a
// row was before it kept its values in a slice.
func mapRow(names, vals []string) (map[string]string, time.Time) {
	m := make(map[string]string, len(names))
	for i, c := range names {
		m[c] = vals[i]
	}
	return m, rowTime(m["TIMESTAMP_DERIVED"], m["TIMESTAMP"])
}

// mapSampleKey is elfSampleKey over the map of a row.
func mapSampleKey(fields map[string]string) string {
	if id := fields["REQUEST_ID"]; id != "" {
		return id
	}
	b, _ := json.Marshal(fields)
	return string(b)
}

// specsOf are type specs that read the given columns (and one the rows
// lack) as metadata and labels.
func specsOf(names []string) []ELFTypeSpec {
	cols := append([]string{"NO_SUCH_COLUMN"}, names...)
	return []ELFTypeSpec{{}, {Metadata: cols}, {Labels: cols}, {Metadata: cols, Labels: cols}}
}

// checkRow fails unless r reads as the map of vals under names: its
// accessors, its JSON line (json.Marshal's of the map), its time, its
// sampling key, and its entry under every spec (the entry of the map, as
// a transformed row's is made).
func checkRow(t *testing.T, names, vals []string, r Row) {
	t.Helper()
	m, at := mapRow(names, vals)
	if got := r.Fields(); !maps.Equal(got, m) || len(got) != len(m) {
		t.Fatalf("%q %q: Fields %q, want %q", names, vals, got, m)
	}
	if r.Len() != len(m) {
		t.Fatalf("%q %q: Len %d, want %d", names, vals, r.Len(), len(m))
	}
	for _, k := range append([]string{"NO_SUCH_COLUMN", ""}, names...) {
		want, wantOK := m[k]
		if v, ok := r.Lookup(k); v != want || ok != wantOK {
			t.Fatalf("%q %q: Lookup(%q) = %q, %v, want %q, %v", names, vals, k, v, ok, want, wantOK)
		}
		if v := r.Field(k); v != want {
			t.Fatalf("%q %q: Field(%q) = %q, want %q", names, vals, k, v, want)
		}
	}
	want, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.appendJSON([]byte("x")); string(got) != "x"+string(want) {
		t.Fatalf("%q %q: line %s, want x%s", names, vals, got, want)
	}
	if !reflect.DeepEqual(r.Time, at) {
		t.Fatalf("%q %q: time %v, want %v", names, vals, r.Time, at)
	}
	if got, want := elfSampleKey(r), mapSampleKey(m); got != want {
		t.Fatalf("%q %q: sample key %q, want %q", names, vals, got, want)
	}
	logDate := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for _, ts := range specsOf(names) {
		got, err := newELFEntries("API", logDate, "k", "cp", ts).entry(r)
		if err != nil {
			t.Fatal(err)
		}
		want, err := newELFEntries("API", logDate, "k", "cp", ts).entryOf(m, at)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q %q %+v: entry\n%+v, want\n%+v", names, vals, ts, got, want)
		}
	}
}

// A row's fields read as the map a row used to be: a name the header
// writes twice has its last column's value, in the line, the time, labels
// and metadata alike; an empty value is a field (Lookup finds it), a
// missing column is not.
func TestRowReadsAsItsMap(t *testing.T) {
	for _, tc := range []struct {
		names, vals []string
	}{
		{[]string{"EVENT_TYPE", "USER_ID", "EMPTY"}, []string{"API", "005A", ""}},
		{[]string{"A", "B", "A"}, []string{"first", "b", "last"}},
		{[]string{"A", "A", "A"}, []string{"1", "2", ""}},
		{[]string{"TIMESTAMP_DERIVED", "TIMESTAMP_DERIVED", "TIMESTAMP"}, []string{"2026-11-28T10:00:00.123Z", "", "20261128100001.500"}},
		{[]string{"TIMESTAMP_DERIVED", "TIMESTAMP_DERIVED"}, []string{"", "2026-11-28T10:00:00.123Z"}},
		{[]string{"REQUEST_ID", "X", "REQUEST_ID"}, []string{"r-1", "x", ""}},
		{[]string{"REQUEST_ID", "X", "REQUEST_ID"}, []string{"", "x", "r-2"}},
		{[]string{"ERROR_CODE", "USER_ID", "ERROR_CODE"}, []string{"E1", "005A", ""}},
		{[]string{"STATUS_CODE", "USER_ID", "STATUS_CODE"}, []string{"200", "", "503"}},
		{[]string{""}, []string{""}},
		{[]string{"", "B"}, []string{"empty name", ""}},
		{[]string{"Z", "<a&b>", "\xff", "é", "\u2028"}, []string{"\r\n", "<&>", "\x00\x1f", "\xc3", "say \"hi\""}},
	} {
		checkRow(t, tc.names, tc.vals, rowOf(tc.names, tc.vals...))
	}
	r := rowOf([]string{"A", "B", "A"}, "first", "b", "last")
	if v, ok := r.Lookup("A"); v != "last" || !ok {
		t.Fatalf("duplicate A: %q %v, want the last column's value", v, ok)
	}
	if r.Len() != 2 || r.appendJSON(nil) == nil || string(r.appendJSON(nil)) != `{"A":"last","B":"b"}` {
		t.Fatalf("duplicate A: Len %d, line %s", r.Len(), r.appendJSON(nil))
	}
	var zero Row
	if v, ok := zero.Lookup("A"); v != "" || ok || zero.Len() != 0 || len(zero.Fields()) != 0 || string(zero.appendJSON(nil)) != "{}" {
		t.Fatalf("zero row: %q %v len %d fields %v line %s", v, ok, zero.Len(), zero.Fields(), zero.appendJSON(nil))
	}
}

// Fields is a new map each time: a transform changing it leaves the row as
// read; a Clone keeps its values when the original's slice is reused.
func TestRowFieldsAndCloneAreTheirs(t *testing.T) {
	vals := []string{"1", "2"}
	r := rowOf([]string{"A", "B"}, vals...)
	f := r.Fields()
	f["A"] = "changed"
	delete(f, "B")
	if r.Field("A") != "1" || r.Field("B") != "2" || r.Fields()["A"] != "1" {
		t.Fatalf("changing Fields changed the row: %q", r.Fields())
	}
	c := r.Clone()
	r.vals[0], r.vals[1] = "x", "y" // the reader reuses the slice
	if c.Field("A") != "1" || c.Field("B") != "2" {
		t.Fatalf("clone %q follows the reused slice", c.Fields())
	}
}

// eventLogFile reads body as ReadEventLogFile and as the map rows of the
// CSV records (the header, then each row under it), and fails unless each
// row reads as its map. The entries made while reading (each row's,
// under specs that promote every column to labels and metadata) must
// still hold their rows' values once the whole file is read.
func eventLogFile(t *testing.T, body string) {
	t.Helper()
	recs, csvErr := ours(strings.TrimPrefix(body, "\ufeff"))
	var header [][]string
	if len(recs) > 0 {
		header, recs = recs[:1], recs[1:]
	}
	wantErr := csvErr != nil
	for i, rec := range recs {
		if len(rec) != len(header[0]) {
			recs, wantErr = recs[:i], true
			break
		}
	}
	var names []string
	if len(header) > 0 {
		names = header[0]
	}
	specs := specsOf(names)
	logDate := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	var got [][]ports.Entry
	var clones []Row
	builders := make([]*elfEntries, len(specs))
	for i, ts := range specs {
		builders[i] = newELFEntries("API", logDate, "k", "cp", ts)
	}
	n := 0
	err := ReadEventLogFile(strings.NewReader(body), func(r Row) error {
		if n >= len(recs) {
			t.Fatalf("%q: row %d, want %d rows", body, n, len(recs))
		}
		checkRow(t, names, recs[n], r)
		var es []ports.Entry
		for _, b := range builders {
			e, err := b.entry(r)
			if err != nil {
				return err
			}
			es = append(es, e)
		}
		got, clones = append(got, es), append(clones, r.Clone())
		n++
		return nil
	})
	if (err != nil) != wantErr || n != len(recs) {
		t.Fatalf("%q: %d rows, error %v; want %d rows, an error %v (%v)", body, n, err, len(recs), wantErr, csvErr)
	}
	if errors.Is(err, ErrFieldTooLarge) {
		return
	}
	for i, rec := range recs {
		m, at := mapRow(names, rec)
		if !maps.Equal(clones[i].Fields(), m) {
			t.Fatalf("%q: row %d kept as %q, want %q", body, i, clones[i].Fields(), m)
		}
		for j, ts := range specs {
			want, _ := newELFEntries("API", logDate, "k", "cp", ts).entryOf(m, at)
			if !reflect.DeepEqual(got[i][j], want) {
				t.Fatalf("%q: row %d %+v: entry kept as\n%+v, want\n%+v", body, i, ts, got[i][j], want)
			}
		}
	}
}

// A file's rows read as the maps of their records: duplicate header
// names, empty values, CRLF inside quoted fields, a byte order mark, rows
// of the wrong width.
func TestEventLogFileRowsReadAsMaps(t *testing.T) {
	for _, body := range []string{
		"",
		"\ufeff",
		"\ufeffA,B\r\n1,2\r\n",
		"A,B,A\r\nfirst,b,last\r\n,,\r\nx,\"\",\"\"\r\n",
		"EVENT_TYPE,TIMESTAMP,TIMESTAMP_DERIVED,QUERY,TIMESTAMP_DERIVED\r\n" +
			"API,20261128100000.123,2026-11-28T10:00:00.123Z,\"SELECT Id\r\nFROM Account\",\r\n" +
			"API,20261128100001.500,,\"say \"\"hi\"\"\",2026-11-28T10:00:02Z\r\n",
		"REQUEST_ID,STATUS_CODE,USER_ID\n\n,500,005A\nr-1,,\n",
		"A,B\n1,2\n1,2,3\n4,5\n",
		"A,B\n1,\"unterminated\n",
		"\"\"\n\n\"\"\n",
		"A\n\"a\r\nb\"\r\n\"\r\n\"",
	} {
		eventLogFile(t, body)
	}
}

// FuzzEventLogFileRowsReadAsMaps checks, for any body, that every row
// ReadEventLogFile hands on reads as the map of its CSV record under the
// header (see eventLogFile): the JSON line is json.Marshal of that map,
// and the entries are those the map makes.
func FuzzEventLogFileRowsReadAsMaps(f *testing.F) {
	for _, seed := range []string{
		"A,B,A\r\nfirst,b,last\r\n",
		"\ufeffEVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID,QUERY\r\nAPI,2026-11-28T10:00:00.123Z,r-1,\"SELECT Id\r\nFROM \"\"A\"\" <&>\"\r\n",
		"TIMESTAMP,TIMESTAMP,ERROR_CODE\n20261128100000,x,\nbad,20261128100000.5,E\n",
		"A,B\n1,2,3\n",
		"\"\",\"\"\n\xff,\u2028\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		eventLogFile(t, body)
	})
}

// FuzzRowJSON checks a row of three columns, any names (the same name
// twice or three times included) and values, against its map.
func FuzzRowJSON(f *testing.F) {
	f.Add("EVENT_TYPE", "API", "QUERY", "SELECT Id\r\nFROM \"A\" <&>", "REQUEST_ID", "")
	f.Add("A", "first", "B", "", "A", "last")
	f.Add("\xff", "\u2028", "", "\x00", "TIMESTAMP", "20261128100000.123")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3 string) {
		names, vals := []string{k1, k2, k3}, []string{v1, v2, v3}
		checkRow(t, names, vals, rowOf(names, vals...))
	})
}

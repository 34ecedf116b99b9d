package salesforce_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

func TestEventLogFileCSV(t *testing.T) {
	body := "\ufeffEVENT_TYPE,TIMESTAMP,TIMESTAMP_DERIVED,QUERY\n" +
		"API,20261128100000.123,2026-11-28T10:00:00.123Z,\"SELECT Id\nFROM Account\"\n" +
		"API,20261128100001.500,,\"say \"\"hi\"\"\"\n" +
		"API,,,plain\n"
	var rows []salesforce.Row
	if err := salesforce.ReadEventLogFile(strings.NewReader(body), func(r salesforce.Row) error {
		rows = append(rows, r.Clone())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	if rows[0].Field("QUERY") != "SELECT Id\nFROM Account" || rows[0].Field("EVENT_TYPE") != "API" ||
		!rows[0].Time.Equal(time.Date(2026, 11, 28, 10, 0, 0, 123e6, time.UTC)) {
		t.Fatalf("row 0 %+v", rows[0])
	}
	if rows[1].Field("QUERY") != `say "hi"` || !rows[1].Time.Equal(time.Date(2026, 11, 28, 10, 0, 1, 500e6, time.UTC)) {
		t.Fatalf("row 1 %+v (TIMESTAMP when TIMESTAMP_DERIVED is empty)", rows[1])
	}
	if !rows[2].Time.IsZero() {
		t.Fatalf("row 2 time %v", rows[2].Time)
	}
	if err := salesforce.ReadEventLogFile(strings.NewReader("A,B\n1,2,3\n"), func(salesforce.Row) error { return nil }); err == nil {
		t.Fatal("a row wider than the header was accepted")
	}
}

// Field values arrive exactly as Salesforce wrote them: a CRLF inside a
// quoted field stays CRLF (encoding/csv would make it LF), quotes, commas,
// UTF-8, spaces around a value, leading zeros and a lone CR are kept; only
// the record terminator (CRLF or LF) is dropped.
func TestEventLogFileCSVIsByteFaithful(t *testing.T) {
	body := "\"EVENT_TYPE\",\"REPORT_DESCRIPTION\",\"QUOTED\",\"SPACES\",\"ZEROS\",\"UTF8\",\"LONE_CR\"\r\n" +
		"\"ReportExport\",\"line one\r\nline two\",\"say \"\"hi\"\", a, b\",\"  padded  \",\"007\",\"Grüße, 東京\",\"a\rb\"\r\n" +
		"ReportExport,\"lf only\nhere\",plain,  x  ,000,é,\n" +
		"ReportExport,\"\r\n\",\"\",\" \",\"0\",\"\",c\rd"
	var rows []map[string]string
	if err := salesforce.ReadEventLogFile(strings.NewReader(body), func(r salesforce.Row) error {
		rows = append(rows, r.Fields())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{
		{"EVENT_TYPE": "ReportExport", "REPORT_DESCRIPTION": "line one\r\nline two", "QUOTED": `say "hi", a, b`, "SPACES": "  padded  ",
			"ZEROS": "007", "UTF8": "Grüße, 東京", "LONE_CR": "a\rb"},
		{"EVENT_TYPE": "ReportExport", "REPORT_DESCRIPTION": "lf only\nhere", "QUOTED": "plain", "SPACES": "  x  ", "ZEROS": "000", "UTF8": "é", "LONE_CR": ""},
		{"EVENT_TYPE": "ReportExport", "REPORT_DESCRIPTION": "\r\n", "QUOTED": "", "SPACES": " ", "ZEROS": "0", "UTF8": "", "LONE_CR": "c\rd"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %q", len(rows), len(want), rows)
	}
	for i := range want {
		for k, v := range want[i] {
			if rows[i][k] != v {
				t.Errorf("row %d %s = %q, want %q", i, k, rows[i][k], v)
			}
		}
	}
}

// The EventLogFile source hands the rows of a file served with CRLF line
// ends on (the fake org serves CSV as Salesforce does) with the CRLF inside
// a quoted field intact.
func TestEventLogFileSourceKeepsCRLFInsideQuotedFields(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	org := &fakesf.ELFOrg{}
	org.Add("0AT1", "ReportExport", now.Add(-time.Hour), "EVENT_TYPE,REQUEST_ID,REPORT_DESCRIPTION\nReportExport,r-1,\"line one\nline two\"\n")
	s := elfSource(t, org, salesforce.ELFSpec{EventTypes: []string{"ReportExport"}}, now)
	got := runELF(t, s, nil, func(es []ports.Entry) bool { return len(es) >= 1 })
	if len(got) == 0 {
		t.Fatal("no row emitted")
	}
	var f map[string]string
	if err := json.Unmarshal([]byte(got[0].Line), &f); err != nil || f["REPORT_DESCRIPTION"] != "line one\r\nline two" || f["REQUEST_ID"] != "r-1" {
		t.Fatalf("row %q (%v): want REPORT_DESCRIPTION as Salesforce wrote it, with its CRLF", got[0].Line, err)
	}
}

func TestEventLogFileFieldCap(t *testing.T) {
	huge := "A,B\n1,\"" + strings.Repeat("x", salesforce.MaxCSVField+10) + "\"\n"
	err := salesforce.ReadEventLogFile(strings.NewReader(huge), func(salesforce.Row) error { return nil })
	if !errors.Is(err, salesforce.ErrFieldTooLarge) {
		t.Fatalf("got %v, want ErrFieldTooLarge", err)
	}
	// A field just under the cap is fine.
	ok := "A,B\n1,\"" + strings.Repeat("y", salesforce.MaxCSVField-10) + "\"\n"
	if err := salesforce.ReadEventLogFile(strings.NewReader(ok), func(salesforce.Row) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// rowsReader generates an EventLogFile body of n rows without holding it.
type rowsReader struct {
	n, i int
	buf  []byte
	// eol ends every line, inside the quoted QUERY field too ("\n" when
	// empty; Salesforce writes "\r\n").
	eol string
}

func (r *rowsReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		switch {
		case r.i == 0:
			r.buf = []byte("EVENT_TYPE,TIMESTAMP_DERIVED,USER_ID,URI,QUERY" + r.eolOrLF())
		case r.i > r.n:
			return 0, io.EOF
		default:
			r.buf = fmt.Appendf(r.buf[:0], "API,2026-11-28T10:%02d:%02d.000Z,005%012d,/services/data/v60.0/query,\"SELECT Id, Name%sFROM Account WHERE Id = '%d'\"%s",
				(r.i/60)%60, r.i%60, r.i, r.eolOrLF(), r.i, r.eolOrLF())
		}
		r.i++
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *rowsReader) eolOrLF() string {
	if r.eol == "" {
		return "\n"
	}
	return r.eol
}

// BenchmarkReadEventLogFile parses 100,000 rows as Salesforce writes them
// (CRLF line ends, a CRLF inside every quoted QUERY field) and reports
// rows/s.
func BenchmarkReadEventLogFile(b *testing.B) {
	const rows = 100_000
	rowsDone := 0
	start := time.Now()
	for b.Loop() {
		n := 0
		if err := salesforce.ReadEventLogFile(&rowsReader{n: rows, eol: "\r\n"}, func(salesforce.Row) error { n++; return nil }); err != nil || n != rows {
			b.Fatalf("%d rows: %v", n, err)
		}
		rowsDone += n
	}
	b.ReportMetric(float64(rowsDone)/time.Since(start).Seconds(), "rows/s")
}

// TestEventLogFileStreamsInBoundedMemory parses a 50 MB body and samples
// the heap while it does: memory must not grow with the file.
func TestEventLogFileStreamsInBoundedMemory(t *testing.T) {
	const rows = 450_000 // about 50 MB
	src := &rowsReader{n: rows}
	counted := &countingReader{r: src}
	var ms runtime.MemStats
	var peak uint64
	n := 0
	err := salesforce.ReadEventLogFile(counted, func(salesforce.Row) error {
		n++
		if n%20_000 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != rows || counted.n < 50<<20*9/10 {
		t.Fatalf("%d rows from %d bytes", n, counted.n)
	}
	t.Logf("%d rows, %.1f MB parsed; peak heap in use %.1f MB", n, float64(counted.n)/1e6, float64(peak)/1e6)
	if peak > 24<<20 {
		t.Fatalf("peak heap in use %.1f MB while parsing a %.0f MB file: the reader holds the file", float64(peak)/1e6, float64(counted.n)/1e6)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

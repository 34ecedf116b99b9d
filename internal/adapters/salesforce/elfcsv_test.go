package salesforce_test

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
)

func TestEventLogFileCSV(t *testing.T) {
	body := "\ufeffEVENT_TYPE,TIMESTAMP,TIMESTAMP_DERIVED,QUERY\n" +
		"API,20261128100000.123,2026-11-28T10:00:00.123Z,\"SELECT Id\nFROM Account\"\n" +
		"API,20261128100001.500,,\"say \"\"hi\"\"\"\n" +
		"API,,,plain\n"
	var rows []salesforce.Row
	if err := salesforce.ReadEventLogFile(strings.NewReader(body), func(r salesforce.Row) error {
		rows = append(rows, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	if rows[0].Fields["QUERY"] != "SELECT Id\nFROM Account" || rows[0].Fields["EVENT_TYPE"] != "API" ||
		!rows[0].Time.Equal(time.Date(2026, 11, 28, 10, 0, 0, 123e6, time.UTC)) {
		t.Fatalf("row 0 %+v", rows[0])
	}
	if rows[1].Fields["QUERY"] != `say "hi"` || !rows[1].Time.Equal(time.Date(2026, 11, 28, 10, 0, 1, 500e6, time.UTC)) {
		t.Fatalf("row 1 %+v (TIMESTAMP when TIMESTAMP_DERIVED is empty)", rows[1])
	}
	if !rows[2].Time.IsZero() {
		t.Fatalf("row 2 time %v", rows[2].Time)
	}
	if err := salesforce.ReadEventLogFile(strings.NewReader("A,B\n1,2,3\n"), func(salesforce.Row) error { return nil }); err == nil {
		t.Fatal("a row wider than the header was accepted")
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
}

func (r *rowsReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		switch {
		case r.i == 0:
			r.buf = []byte("EVENT_TYPE,TIMESTAMP_DERIVED,USER_ID,URI,QUERY\n")
		case r.i > r.n:
			return 0, io.EOF
		default:
			r.buf = fmt.Appendf(nil, "API,2026-11-28T10:%02d:%02d.000Z,005%012d,/services/data/v60.0/query,\"SELECT Id, Name\nFROM Account WHERE Id = '%d'\"\n",
				(r.i/60)%60, r.i%60, r.i, r.i)
		}
		r.i++
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
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

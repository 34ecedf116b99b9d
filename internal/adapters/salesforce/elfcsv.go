package salesforce

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// MaxCSVField is the largest field an EventLogFile row may carry. A longer
// one (a broken or hostile file) stops the file with an error instead of
// growing memory.
const MaxCSVField = 1 << 20

// ErrFieldTooLarge reports a CSV field above MaxCSVField.
var ErrFieldTooLarge = errors.New("eventlogfile: a CSV field exceeds 1 MiB")

// Row is one EventLogFile row: the header's columns and the row time.
type Row struct {
	Fields map[string]string
	// Time is TIMESTAMP_DERIVED, else TIMESTAMP, else zero.
	Time time.Time
}

// ReadEventLogFile streams a LogFile body (CSV with a header row, quoted
// fields may hold newlines) and calls emit for each row. It holds one row
// at a time: memory does not grow with the file.
func ReadEventLogFile(body io.Reader, emit func(Row) error) error {
	cr := csv.NewReader(&fieldCap{r: bufio.NewReaderSize(body, 64<<10)})
	cr.FieldsPerRecord = 0 // every row has the header's width
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil // an empty file
	}
	if err != nil {
		return fmt.Errorf("eventlogfile: header: %w", err)
	}
	cols := make([]string, len(header))
	for i, h := range header {
		cols[i] = strings.TrimPrefix(h, "\ufeff")
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("eventlogfile: %w", err)
		}
		row := Row{Fields: make(map[string]string, len(cols))}
		for i, c := range cols {
			row.Fields[c] = rec[i]
		}
		row.Time = rowTime(row.Fields)
		if err := emit(row); err != nil {
			return err
		}
	}
}

// rowTime reads TIMESTAMP_DERIVED (2026-11-28T10:00:00.123Z), else
// TIMESTAMP (20261128100000.123, UTC).
func rowTime(f map[string]string) time.Time {
	if v := f["TIMESTAMP_DERIVED"]; v != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t.UTC()
		}
	}
	if v := f["TIMESTAMP"]; v != "" {
		for _, layout := range []string{"20060102150405.000", "20060102150405"} {
			if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

// fieldCap passes bytes through while tracking CSV quoting, and fails once
// one field grows past MaxCSVField: encoding/csv would otherwise buffer a
// field of any size.
type fieldCap struct {
	r       *bufio.Reader
	quoted  bool
	pending bool // the previous byte was a quote inside a quoted field
	field   int
}

func (f *fieldCap) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	for _, b := range p[:n] {
		switch {
		case f.pending:
			f.pending = false
			if b == '"' { // an escaped quote: still inside the field
				f.field++
				continue
			}
			f.quoted = false
			f.step(b)
		case f.quoted && b == '"':
			f.pending = true
		case f.quoted:
			f.field++
		default:
			f.step(b)
		}
		if f.field > MaxCSVField {
			return 0, ErrFieldTooLarge
		}
	}
	return n, err
}

// step handles a byte outside quotes.
func (f *fieldCap) step(b byte) {
	switch b {
	case ',', '\n', '\r':
		f.field = 0
	case '"':
		f.quoted = true
	default:
		f.field++
	}
}

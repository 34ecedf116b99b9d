package salesforce

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/jsonstr"
)

// MaxCSVField is the largest field an EventLogFile row may carry. A longer
// one (a broken or hostile file) stops the file with an error instead of
// growing memory.
const MaxCSVField = 1 << 20

// ErrFieldTooLarge reports a CSV field above MaxCSVField.
var ErrFieldTooLarge = errors.New("eventlogfile: a CSV field exceeds 1 MiB")

// Row is one EventLogFile row: its values, in the order of the file's
// header, and the row time. Its fields are read by name (Field, Lookup) or
// as a map (Fields), built only when asked. A column named twice in the
// header gives the name the value of its last column, as a map filled in
// column order would.
//
// A Row is valid only during the emit call it is passed to: the reader
// reuses the slice of values for the next row (the values themselves are
// strings of their own and may be kept). Clone returns a Row that may be
// kept.
type Row struct {
	cols *columns
	vals []string
	// Time is TIMESTAMP_DERIVED, else TIMESTAMP, else zero.
	Time time.Time
}

// columns is a file's header, shared by its rows.
type columns struct {
	names []string       // as in the header
	index map[string]int // each name's column: the last one of a name written twice
	// sorted are the columns of the distinct names in name order (bytewise,
	// as encoding/json sorts a map's keys), and prefix each one's name as
	// JSON, preceded by { for the first and , for the others, followed by :
	sorted []int
	prefix []string
	// derived and stamp are the columns of TIMESTAMP_DERIVED and TIMESTAMP
	// (-1: absent).
	derived, stamp int
}

func newColumns(names []string) *columns {
	c := &columns{names: names, index: make(map[string]int, len(names)), derived: -1, stamp: -1}
	for i, n := range names {
		c.index[n] = i
	}
	keys := slices.Sorted(maps.Keys(c.index))
	c.sorted, c.prefix = make([]int, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		c.sorted[i] = c.index[k]
		sep := byte(',')
		if i == 0 {
			sep = '{'
		}
		c.prefix[i] = string(append(jsonstr.Append([]byte{sep}, k), ':'))
	}
	if i, ok := c.index["TIMESTAMP_DERIVED"]; ok {
		c.derived = i
	}
	if i, ok := c.index["TIMESTAMP"]; ok {
		c.stamp = i
	}
	return c
}

// Field returns the value of the column name, "" when the row has none.
func (r Row) Field(name string) string {
	v, _ := r.Lookup(name)
	return v
}

// Lookup returns the value of the column name and whether the row has one.
func (r Row) Lookup(name string) (string, bool) {
	if r.cols == nil {
		return "", false
	}
	i, ok := r.cols.index[name]
	if !ok {
		return "", false
	}
	return r.vals[i], true
}

// Len returns the number of the row's fields: its distinct column names.
func (r Row) Len() int {
	if r.cols == nil {
		return 0
	}
	return len(r.cols.sorted)
}

// Fields returns the row's fields as a new map, the caller's to change.
func (r Row) Fields() map[string]string {
	m := make(map[string]string, r.Len())
	if r.cols != nil {
		for i, k := range r.cols.names { // a name written twice: the last column's value
			m[k] = r.vals[i]
		}
	}
	return m
}

// Clone returns a copy of r that stays valid after the emit call.
func (r Row) Clone() Row {
	r.vals = slices.Clone(r.vals)
	return r
}

// at returns the value of column i, "" for -1.
func (r Row) at(i int) string {
	if i < 0 {
		return ""
	}
	return r.vals[i]
}

// appendJSON appends the row's fields as the JSON object json.Marshal
// makes of Fields(): keys sorted, strings escaped as encoding/json escapes
// them.
func (r Row) appendJSON(dst []byte) []byte {
	if r.Len() == 0 {
		return append(dst, "{}"...)
	}
	for i, c := range r.cols.sorted {
		dst = append(dst, r.cols.prefix[i]...)
		dst = jsonstr.Append(dst, r.vals[c])
	}
	return append(dst, '}')
}

// ReadEventLogFile streams a LogFile body (CSV with a header row) and
// calls emit for each row. Field values are exactly the bytes Salesforce
// wrote (see csvReader); a leading UTF-8 byte order mark is dropped. It
// holds one row at a time: memory does not grow with the file. The rows
// share the header, read once.
func ReadEventLogFile(body io.Reader, emit func(Row) error) error {
	br := bufio.NewReaderSize(body, 64<<10)
	if b, _ := br.Peek(3); string(b) == "\ufeff" {
		_, _ = br.Discard(3)
	}
	cr := &csvReader{r: br, line: 1}
	header, err := cr.read()
	if errors.Is(err, io.EOF) {
		return nil // an empty file
	}
	if err != nil {
		return fmt.Errorf("eventlogfile: header: %w", err)
	}
	cols := newColumns(slices.Clone(header))
	for {
		line := cr.line
		rec, err := cr.read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("eventlogfile: %w", err)
		}
		if len(rec) != len(cols.names) {
			return fmt.Errorf("eventlogfile: the record on line %d has %d fields, the header %d", line, len(rec), len(cols.names))
		}
		row := Row{cols: cols, vals: rec}
		row.Time = rowTime(row.at(cols.derived), row.at(cols.stamp))
		if err := emit(row); err != nil {
			return err
		}
	}
}

// rowTime reads the TIMESTAMP_DERIVED value derived
// (2026-11-28T10:00:00.123Z), else the TIMESTAMP value stamp
// (20261128100000.123, UTC).
func rowTime(derived, stamp string) time.Time {
	if derived != "" {
		if t, err := time.Parse(time.RFC3339Nano, derived); err == nil {
			return t.UTC()
		}
	}
	if stamp != "" {
		for _, layout := range []string{"20060102150405.000", "20060102150405"} {
			if t, err := time.ParseInLocation(layout, stamp, time.UTC); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

// Errors of a malformed CSV record (the wording of encoding/csv's).
var (
	errBareQuote = errors.New(`bare " in non-quoted field`)
	errQuote     = errors.New(`extraneous or missing " in quoted field`)
)

// csvReader reads RFC 4180 records byte for byte, streaming: fields are
// separated by commas; a record ends with CRLF or LF (dropped), or at the
// end of the input; a field that starts with a quote is quoted: it runs to
// the quote not followed by another, "" stands for ", and everything else,
// CR and LF included, is the field's own. Unlike encoding/csv, a CRLF
// inside a quoted field stays CRLF. As in encoding/csv, empty lines are
// skipped, a CR right before the end of the input ends the record, a lone
// CR elsewhere is data, a quote inside an unquoted field or after a closing
// quote is an error. A field longer than MaxCSVField is ErrFieldTooLarge,
// found before more than one buffer (64 KiB) past the limit is read.
type csvReader struct {
	r    *bufio.Reader
	rec  []byte // the current record's fields, back to back
	ends []int  // where each field ends in rec
	out  []string
	line int // the line being read, from 1
}

// peek returns the next n bytes, fewer at the end of the input; only a
// read error other than io.EOF is an error.
func (c *csvReader) peek(n int) ([]byte, error) {
	b, err := c.r.Peek(n)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return b, err
	}
	return b, nil
}

// buffered returns every byte buffered (filling the buffer when it is
// empty); none at the end of the input.
func (c *csvReader) buffered() ([]byte, error) {
	n := c.r.Buffered()
	if n == 0 {
		if _, err := c.peek(1); err != nil {
			return nil, err
		}
		if n = c.r.Buffered(); n == 0 {
			return nil, nil
		}
	}
	b, _ := c.r.Peek(n)
	return b, nil
}

// discard drops n bytes it has peeked.
func (c *csvReader) discard(n int) { _, _ = c.r.Discard(n) }

func (c *csvReader) fail(err error) error { return fmt.Errorf("line %d: %w", c.line, err) }

// read returns the next record (valid until the next call), or io.EOF.
func (c *csvReader) read() ([]string, error) {
	c.rec, c.ends = c.rec[:0], c.ends[:0]
	for { // empty lines hold no record
		b, err := c.peek(2)
		if err != nil {
			return nil, c.fail(err)
		}
		switch {
		case len(b) == 0:
			return nil, io.EOF
		case b[0] == '\n':
			c.discard(1)
			c.line++
			continue
		case b[0] == '\r' && len(b) == 1:
			c.discard(1)
			return nil, io.EOF
		case b[0] == '\r' && b[1] == '\n':
			c.discard(2)
			c.line++
			continue
		}
		break
	}
	for {
		end, err := c.field()
		if err != nil {
			return nil, err
		}
		c.ends = append(c.ends, len(c.rec))
		if end {
			break
		}
	}
	s := string(c.rec)
	c.out = c.out[:0]
	from := 0
	for _, e := range c.ends {
		c.out = append(c.out, s[from:e])
		from = e
	}
	return c.out, nil
}

// field reads one field into rec and the separator after it, and reports
// whether that ended the record.
func (c *csvReader) field() (recordEnd bool, err error) {
	start := len(c.rec)
	grow := func(b []byte) error {
		c.rec = append(c.rec, b...)
		if len(c.rec)-start > MaxCSVField {
			return ErrFieldTooLarge
		}
		return nil
	}
	b, err := c.peek(1)
	if err != nil {
		return false, c.fail(err)
	}
	if len(b) == 1 && b[0] == '"' {
		c.discard(1)
		for {
			buf, err := c.buffered()
			if err != nil {
				return false, c.fail(err)
			}
			if len(buf) == 0 {
				return false, c.fail(errQuote) // the input ends inside quotes
			}
			i := bytes.IndexByte(buf, '"')
			if i < 0 {
				c.line += bytes.Count(buf, []byte{'\n'})
				if err := grow(buf); err != nil {
					return false, err
				}
				c.discard(len(buf))
				continue
			}
			c.line += bytes.Count(buf[:i], []byte{'\n'})
			if err := grow(buf[:i]); err != nil {
				return false, err
			}
			c.discard(i + 1)
			next, err := c.peek(2)
			if err != nil {
				return false, c.fail(err)
			}
			switch {
			case len(next) == 0:
				return true, nil
			case next[0] == '"': // "" is a quote
				if err := grow(next[:1]); err != nil {
					return false, err
				}
				c.discard(1)
				continue
			}
			return c.separator(next)
		}
	}
	for {
		buf, err := c.buffered()
		if err != nil {
			return false, c.fail(err)
		}
		if len(buf) == 0 {
			return true, nil
		}
		i := 0
		for i < len(buf) && !special[buf[i]] {
			i++
		}
		if err := grow(buf[:i]); err != nil {
			return false, err
		}
		c.discard(i)
		if i == len(buf) {
			continue
		}
		next, err := c.peek(2)
		if err != nil {
			return false, c.fail(err)
		}
		switch {
		case next[0] == '"':
			return false, c.fail(errBareQuote)
		case next[0] == '\r' && len(next) == 2 && next[1] != '\n': // a lone CR is data
			if err := grow(next[:1]); err != nil {
				return false, err
			}
			c.discard(1)
			continue
		}
		return c.separator(next)
	}
}

// separator consumes what follows a field: a comma, or a record's end
// (LF, CRLF, or a CR at the end of the input). Anything else follows a
// closing quote and is an error.
func (c *csvReader) separator(next []byte) (recordEnd bool, err error) {
	switch {
	case next[0] == ',':
		c.discard(1)
		return false, nil
	case next[0] == '\n':
		c.discard(1)
		c.line++
		return true, nil
	case next[0] == '\r' && len(next) == 1:
		c.discard(1)
		return true, nil
	case next[0] == '\r' && next[1] == '\n':
		c.discard(2)
		c.line++
		return true, nil
	}
	return false, c.fail(errQuote)
}

// special marks the bytes that end an unquoted run.
var special = [256]bool{',': true, '\n': true, '\r': true, '"': true}

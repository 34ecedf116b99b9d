package salesforce

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
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

// ReadEventLogFile streams a LogFile body (CSV with a header row) and
// calls emit for each row. Field values are exactly the bytes Salesforce
// wrote (see csvReader); a leading UTF-8 byte order mark is dropped. It
// holds one row at a time: memory does not grow with the file.
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
	cols := slices.Clone(header)
	for {
		line := cr.line
		rec, err := cr.read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("eventlogfile: %w", err)
		}
		if len(rec) != len(cols) {
			return fmt.Errorf("eventlogfile: the record on line %d has %d fields, the header %d", line, len(rec), len(cols))
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

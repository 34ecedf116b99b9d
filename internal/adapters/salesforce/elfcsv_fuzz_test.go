package salesforce

import (
	"bufio"
	"encoding/csv"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// records reads every record of in with read, until the end or the first
// error.
func records(read func() ([]string, error)) ([][]string, error) {
	var out [][]string
	for {
		rec, err := read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, slices.Clone(rec))
	}
}

func ours(in string) ([][]string, error) {
	c := &csvReader{r: bufio.NewReaderSize(strings.NewReader(in), 16), line: 1}
	return records(c.read)
}

func std(in string) ([][]string, error) {
	r := csv.NewReader(strings.NewReader(in))
	r.FieldsPerRecord = -1
	return records(r.Read)
}

// FuzzCSVAgreesWithEncodingCSV checks the EventLogFile CSV reader against
// encoding/csv: on input encoding/csv accepts, the records are the same,
// byte for byte when no field holds a CR, and otherwise once a CRLF inside
// a quoted field (which encoding/csv turns into LF and the reader keeps) is
// made LF; on input encoding/csv refuses, the reader refuses it too, after
// the same records. The reader's buffer is 16 bytes, so fields, quotes and
// line ends straddle refills.
func FuzzCSVAgreesWithEncodingCSV(f *testing.F) {
	for _, seed := range []string{
		"a,b,c\n1,2,3\n",
		"\"a\",\"b\"\r\n\"1\",\"2\"\r\n",
		"\"line one\r\nline two\",x\r\n",
		"\"say \"\"hi\"\"\",\"a, b\"\n",
		"  padded  ,007,Grüße\n",
		"a\rb,c\r\n",
		"\n\r\na,b\n\n",
		"a,b\r",
		"\"unterminated\n",
		"a\"b,c\n",
		"\"a\"b,c\n",
		"\"a\"\r",
		"\"a\"\rb\n",
		"x,,\"\",\n",
		"\"" + strings.Repeat("long field ", 10) + "\"\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		want, wantErr := std(in)
		got, gotErr := ours(in)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%q: encoding/csv: %v, ours: %v", in, wantErr, gotErr)
		}
		cr := false
		for _, rec := range got {
			for _, f := range rec {
				cr = cr || strings.Contains(f, "\r")
			}
		}
		if cr {
			for _, rec := range got {
				for i, f := range rec {
					rec[i] = strings.ReplaceAll(f, "\r\n", "\n")
				}
			}
		}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("%q:\nencoding/csv %q (%v)\nours         %q (%v)", in, want, wantErr, got, gotErr)
		}
	})
}

// Where the reader must differ from encoding/csv: a CRLF inside a quoted
// field is kept (encoding/csv makes it LF); the record terminator, CRLF or
// LF, is dropped (as encoding/csv does).
func TestCSVReaderKeepsCRLFInsideQuotesAndDropsTerminators(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    [][]string
		differs bool // from encoding/csv
	}{
		{"\"a\r\nb\",c\r\n", [][]string{{"a\r\nb", "c"}}, true},
		{"\"a\r\nb\",c\n", [][]string{{"a\r\nb", "c"}}, true},
		{"x,\"\r\n\r\n\"\r\ny,z", [][]string{{"x", "\r\n\r\n"}, {"y", "z"}}, true},
		{"a\r\nb\nc", [][]string{{"a"}, {"b"}, {"c"}}, false},
		{"\"q\"\r\n\"r\"\n", [][]string{{"q"}, {"r"}}, false},
	} {
		got, err := ours(tc.in)
		if err != nil || !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("%q: %q (%v), want %q", tc.in, got, err, tc.want)
		}
		if std, _ := std(tc.in); slices.EqualFunc(std, tc.want, slices.Equal) == tc.differs {
			t.Errorf("%q: encoding/csv reads %q: differs from %q should be %v", tc.in, std, tc.want, tc.differs)
		}
	}
}

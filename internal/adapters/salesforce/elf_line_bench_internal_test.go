package salesforce

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// benchELFRows parses n rows shaped like an API EventLogFile's (the
// columns of the daemon benchmark's file plus the usual numeric and id
// columns, a quoted newline in QUERY).
func benchELFRows(b *testing.B, n int) []Row {
	b.Helper()
	var sb strings.Builder
	sb.WriteString("EVENT_TYPE,TIMESTAMP,REQUEST_ID,ORGANIZATION_ID,USER_ID,RUN_TIME,CPU_TIME,URI,SESSION_KEY,LOGIN_KEY,USER_TYPE,REQUEST_STATUS,DB_TOTAL_TIME,CLIENT_IP,API_TYPE,API_VERSION,METHOD_NAME,ENTITY_NAME,ROWS_PROCESSED,QUERY,TIMESTAMP_DERIVED,USER_ID_DERIVED\r\n")
	for i := range n {
		sb.WriteString("API,20261128100000.123,4exLFFQZ1234" + strings.Repeat("x", i%3) + ",00D000000000001,005000000000001,42,17,/services/data/v60.0/query,Wr0ngKey,LoginKey1,Standard,S,12345678,203.0.113.7,R,60.0,query,Account,200,\"SELECT Id, Name\r\nFROM Account WHERE Id = '<1>' & x\",2026-11-28T10:00:00.123Z,005000000000001AAA\r\n")
	}
	var rows []Row
	if err := ReadEventLogFile(strings.NewReader(sb.String()), func(r Row) error { rows = append(rows, r.Clone()); return nil }); err != nil {
		b.Fatal(err)
	}
	return rows
}

// BenchmarkELFEntry builds the entries of parsed EventLogFile rows: the
// sorted-key JSON line, the labels and the structured metadata, as the
// source does for each row of a file. One op is one row.
func BenchmarkELFEntry(b *testing.B) {
	rows := benchELFRows(b, 64)
	logDate := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	entries := newELFEntries("API", logDate, ELFKeyPrefix+"API", "cp", ELFTypeSpec{}) // once per file
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e, err := entries.entry(rows[i%len(rows)])
		if err != nil || e.Line == "" {
			b.Fatal(err)
		}
		i++
	}
	runtime.KeepAlive(rows)
}

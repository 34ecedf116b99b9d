package loki

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// Printed is one entry as a dry run prints it (Config.Print): one JSON
// object a line.
type Printed struct {
	Labels   map[string]string `json:"labels"`
	Time     string            `json:"time"` // RFC 3339 with nanoseconds, UTC
	Line     string            `json:"line"`
	Metadata map[string]string `json:"metadata"`
}

// print writes the prepared entries to cfg.Print, a batch at a time (the
// lanes push concurrently: their lines never interleave). An error writing
// is fatal: nothing would be printed any more.
func (s *Sink) print(batch []ports.Entry) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	n := 0
	for _, e := range batch {
		if e.CheckpointOnly {
			continue
		}
		p := Printed{Labels: e.Labels, Time: e.Time.UTC().Format(time.RFC3339Nano), Line: e.Line, Metadata: e.Metadata}
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		if p.Metadata == nil {
			p.Metadata = map[string]string{}
		}
		if err := enc.Encode(p); err != nil {
			return fmt.Errorf("dry run: encode an entry: %w", err)
		}
		n++
	}
	s.printMu.Lock()
	_, err := s.cfg.Print.Write(b.Bytes())
	s.printMu.Unlock()
	if err != nil {
		return fmt.Errorf("dry run: print the entries: %w", err)
	}
	s.accepting.Store(true)
	s.Stats.EntriesPushed.Add(int64(n))
	s.Stats.BytesPushed.Add(int64(b.Len()))
	s.Stats.LastSuccess.Store(time.Now().UnixNano())
	return nil
}

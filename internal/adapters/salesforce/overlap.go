package salesforce

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
)

// OverlapReportEvery is how often a "*" source still waiting for the
// listing of a source ahead of it (domain.Owners.Await) says so again.
const OverlapReportEvery = 5 * time.Minute

// awaitOwners waits, when the EventLogFile "*" has a source ahead of it (the
// Pub/Sub "*"), for that source's first listing, logging why it waits.
func (s *ELFSource) awaitOwners(ctx context.Context) error {
	if s.spec.Owners == nil {
		return nil
	}
	return s.spec.Owners.Await(ctx, domain.SourceEventLogFile, s.clock, OverlapReportEvery, func(w domain.Waiting) {
		ahead := "sources." + strings.Join(w.For, ", sources.")
		if w.Err == nil {
			s.log.Info(fmt.Sprintf("eventlogfile: waiting for the first \"*\" listing of %s before discovering event types: "+
				"the categories that source lists are its own (sources.allow_overlap is false)", ahead), "waited", w.Waited.Round(time.Second))
			return
		}
		s.log.Warn(fmt.Sprintf("eventlogfile: still waiting for the first \"*\" listing of %s before discovering event types: that listing fails, "+
			"and discovering without it could ship a category twice; the wait ends at its first success "+
			"(or list the event types by name, or set sources.allow_overlap)", ahead), "error", w.Err, "waited", w.Waited.Round(time.Second))
	})
}

// owned keeps the discovered types no other source of the org ingests,
// logging each claim and each skip once.
func (s *ELFSource) owned(types []string) []string {
	if s.spec.Owners == nil {
		return types
	}
	out := types[:0]
	for _, d := range s.spec.Owners.List(domain.SourceEventLogFile, types) {
		switch {
		case d.Ingest:
			out = append(out, d.Name)
			if d.Claimed {
				s.log.Info(fmt.Sprintf("eventlogfile: discovered type %s: category %s is ingested here", d.Name, d.Category))
			}
		case d.First:
			s.log.Info(fmt.Sprintf("eventlogfile: skipping discovered type %s: category %s is ingested by %s", d.Name, d.Category, d.Owner))
		}
	}
	return out
}

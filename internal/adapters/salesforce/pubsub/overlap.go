package pubsub

import (
	"fmt"
	"slices"

	"github.com/sf2loki/sf2loki/internal/domain"
)

// owned publishes a "*" listing to the org's overlap registry and keeps
// the topics no other source of the org ingests, logging each claim and
// each skip once. A failed listing (err) publishes nothing: the sources
// waiting for it are told why, and the named topics it returned are kept.
func (s *Source) owned(topics []string, err error) []string {
	o := s.spec.Owners
	if o == nil || !slices.Contains(s.spec.Topics, "*") {
		return topics
	}
	if err != nil {
		o.ListFailed(domain.SourcePubSub, err)
		return topics
	}
	out := make([]string, 0, len(topics))
	for _, d := range o.List(domain.SourcePubSub, topics) {
		switch {
		case d.Ingest:
			out = append(out, d.Name)
			if d.Claimed {
				s.log.Info(fmt.Sprintf("pubsub: discovered topic %s: category %s is ingested here", d.Name, d.Category))
			}
		case d.First:
			s.log.Info(fmt.Sprintf("pubsub: skipping discovered topic %s: category %s is ingested by %s", d.Name, d.Category, d.Owner))
		}
	}
	return out
}

package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sf2loki/sf2loki/internal/domain"
)

// checkOverlap refuses, in each org, an event category (domain.Category)
// that the configuration names on more than one source, unless the org's
// sources.allow_overlap is set: each source would ship the same events.
// Only names count; a "*" is settled at run time (a discovered name whose
// category another source ingests is skipped).
func (c *Config) checkOverlap(orgs []orgSection, add func(path, format string, args ...any)) {
	for _, o := range orgs {
		if o.src.AllowOverlap {
			continue
		}
		type entry struct{ source, key, name string }
		var entries []entry
		for _, t := range o.src.PubSub.Topics {
			entries = append(entries, entry{domain.SourcePubSub, "sources.pubsub.topics", t})
		}
		for i, obj := range o.src.EventlogObjects.Objects {
			entries = append(entries, entry{domain.SourceEventlogObjects, fmt.Sprintf("sources.eventlog_objects.objects[%d].name", i), obj.Name})
		}
		for _, t := range o.src.EventLogFile.EventTypes {
			entries = append(entries, entry{domain.SourceEventLogFile, "sources.eventlogfile.event_types", t})
		}
		byCat := map[string][]entry{}
		var cats []string
		for _, e := range entries {
			cat, ok := domain.Category(e.source, e.name)
			if !ok {
				continue
			}
			if _, seen := byCat[cat]; !seen {
				cats = append(cats, cat)
			}
			byCat[cat] = append(byCat[cat], e)
		}
		for _, cat := range cats {
			es := byCat[cat]
			var sources []string
			for _, e := range es {
				if !slices.Contains(sources, e.source) {
					sources = append(sources, e.source)
				}
			}
			if len(sources) < 2 {
				continue
			}
			named := make([]string, len(es))
			for i, e := range es {
				named[i] = fmt.Sprintf("%s%s %q", o.prefix, e.key, e.name)
			}
			list := strings.Join(named[:len(named)-1], ", ") + " and " + named[len(named)-1]
			times := map[int]string{2: "twice", 3: "three times"}[len(sources)]
			add(o.prefix+"sources", "the %s category is enabled on %d sources: %s would ship the same %s events %s; "+
				"keep one, or set %ssources.allow_overlap: true", cat, len(sources), list, cat, times, o.prefix)
		}
	}
}

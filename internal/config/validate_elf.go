package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
)

var (
	elfTypeName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	labelName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// checkELFTypes checks each org's sources.eventlogfile.types: names an
// event type can have, label names Loki takes and that no other part of
// sf2loki sets, no label a drop_field removes, and no type listed twice.
// A type that event_types does not read is a warning.
func (c *Config) checkELFTypes(orgs []orgSection, add func(path, format string, args ...any)) (warnings []string) {
	for _, o := range orgs {
		elf := o.src.EventLogFile
		dropped := map[string]bool{}
		for _, tr := range elf.Transforms {
			if tr.Action == "drop_field" {
				for _, f := range tr.Fields {
					dropped[f] = true
				}
			}
		}
		seen := map[string]bool{}
		for i, t := range elf.Types {
			at := fmt.Sprintf("%ssources.eventlogfile.types[%d]", o.prefix, i)
			if !elfTypeName.MatchString(t.Name) {
				add(at+".name", "%q is not an event type name (letters, digits and _ only)", t.Name)
				continue
			}
			if seen[t.Name] {
				add(at+".name", "%s is listed twice; merge the two entries", t.Name)
			}
			seen[t.Name] = true
			if !slices.Contains(elf.EventTypes, t.Name) && !slices.Contains(elf.EventTypes, "*") {
				warnings = append(warnings, fmt.Sprintf("%s: %s is not in sources.eventlogfile.event_types, so its settings apply to nothing", at, t.Name))
			}
			for j, l := range t.Labels {
				lat := fmt.Sprintf("%s.labels[%d]", at, j)
				switch {
				case !labelName.MatchString(l):
					add(lat, "%q is not a Loki label name ([A-Za-z_][A-Za-z0-9_]*); ship the column as structured metadata instead", l)
				case slices.Contains(loki.AllowedLabels, strings.ToLower(l)):
					add(lat, "%s is a label sf2loki sets itself (%s); promote another column", l, strings.Join(loki.AllowedLabels, ", "))
				case dropped[l]:
					add(lat, "a drop_field transform of sources.eventlogfile removes %s, so the label would never be set; remove the label, or hash or mask the column instead", l)
				}
			}
		}
	}
	return warnings
}

// compressionWarning warns about a sink.loki.compression that the encoding
// ignores: protobuf pushes are always snappy.
func (c *Config) compressionWarning() []string {
	l := c.Sink.Loki
	if l.Encoding == "protobuf" && (l.Compression == "gzip" || l.Compression == "none") {
		return []string{fmt.Sprintf("sink.loki.compression: %s is ignored with encoding protobuf, which Loki takes snappy-compressed only; remove the key, or use encoding json", l.Compression)}
	}
	return nil
}

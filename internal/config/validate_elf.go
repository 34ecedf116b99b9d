package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/sf2loki/sf2loki/internal/lokirules"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

var labelName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkELFTypes checks each org's sources.eventlogfile.types: names an
// event type can have, label names Loki takes and that no other part of
// sf2loki sets, no label a drop_field removes, and no type listed twice.
// A type that event_types does not read is a warning.
func (c *Config) checkELFTypes(orgs []orgSection, add func(path, format string, args ...any)) (warnings []string) {
	for _, o := range orgs {
		elf := o.src.EventLogFile
		warnings = append(warnings, checkELFTypeNames(o.prefix, elf.EventTypes, add)...)
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
			if !sfrules.ValidName(t.Name) {
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
				case slices.Contains(lokirules.AllowedLabels, strings.ToLower(l)):
					add(lat, "%s is a label sf2loki sets itself (%s); promote another column", l, strings.Join(lokirules.AllowedLabels, ", "))
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

// supportedTypesPage is Salesforce's list of EventLogFile event types.
const supportedTypesPage = "https://developer.salesforce.com/docs/atlas.en-us.object_reference.meta/object_reference/sforce_api_objects_eventlogfile_supportedeventtypes.htm"

// realTimeEventName says where a Real-Time Event Monitoring stream or
// storage object name given as an EventLogFile type belongs ("" when t is
// neither).
func realTimeEventName(t string) string {
	for _, s := range sfrules.RTEMStreams {
		if strings.EqualFold(t, s.Stream) || strings.EqualFold(t, s.Storage) {
			return fmt.Sprintf("stream it with sources.pubsub.topics: [/event/%s], or poll its storage object with sources.eventlog_objects.objects: [%s]", s.Stream, s.Storage)
		}
	}
	return ""
}

// checkELFTypeNames checks sources.eventlogfile.event_types against the
// types Salesforce documents (sfrules.EventLogFileTypes), matched
// without regard to case. A name within two edits of a documented type is
// a misspelling of it and refused, naming it; any other unknown name is a
// warning (Salesforce adds types with new releases).
func checkELFTypeNames(prefix string, types []string, add func(path, format string, args ...any)) (warnings []string) {
	path := prefix + "sources.eventlogfile.event_types"
	for _, t := range types {
		if t == "*" || !sfrules.ValidName(t) {
			continue // validateOrg reports a name that is no name
		}
		if _, ok := sfrules.DocumentedEventLogFileType(t); ok {
			continue
		}
		if where := realTimeEventName(t); where != "" {
			add(path, "%s is a Real-Time Event Monitoring event, not an EventLogFile event type: no file of it would ever be listed; %s", t, where)
			continue
		}
		closest, d := "", len(t)
		for _, known := range sfrules.EventLogFileTypes {
			if dk := distance(strings.ToLower(t), strings.ToLower(known)); dk < d {
				closest, d = known, dk
			}
		}
		if d <= 2 && len(t) > 3 {
			add(path, "%s is not an EventLogFile event type: did you mean %s? No file of type %s would ever be listed (Salesforce's list: %s)",
				t, closest, t, supportedTypesPage)
			continue
		}
		warnings = append(warnings, fmt.Sprintf("%s: %s is not an EventLogFile event type Salesforce documents (%s; the closest is %s): "+
			"unless the type is newer than this release, no file of it will be listed; sf2loki doctor's entitlement line says whether the org has files of it",
			path, t, supportedTypesPage, closest))
	}
	return warnings
}

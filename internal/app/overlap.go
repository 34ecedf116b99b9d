package app

import (
	"slices"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
)

// overlapOwners is one org's overlap registry (docs/governance.md): the
// names its sources list own their categories, and the "*" sources claim
// the rest as they discover them, the Pub/Sub "*" ahead of the
// EventLogFile "*". nil with sources.allow_overlap (nothing is filtered)
// or without a "*" (nothing is discovered). siblings are the other orgs
// entries of the same Salesforce org: the names they list are theirs.
func overlapOwners(src config.Sources, siblings []config.OrgSibling) *domain.Owners {
	topics, types := src.PubSub.Topics, src.EventLogFile.EventTypes
	if src.AllowOverlap || (!slices.Contains(topics, "*") && !slices.Contains(types, "*")) {
		return nil
	}
	var wildcards []string
	if slices.Contains(topics, "*") {
		wildcards = append(wildcards, domain.SourcePubSub)
	}
	if slices.Contains(types, "*") {
		wildcards = append(wildcards, domain.SourceEventLogFile)
	}
	o := domain.NewOwners(wildcards...)
	for _, t := range topics {
		o.Static(domain.SourcePubSub, t)
	}
	for _, obj := range src.EventlogObjects.Objects {
		o.Static(domain.SourceEventlogObjects, obj.Name)
	}
	for _, t := range types {
		o.Static(domain.SourceEventLogFile, t)
	}
	for _, sib := range siblings {
		for _, t := range sib.Sources.PubSub.Topics {
			o.Elsewhere(sib.Name, domain.SourcePubSub, t)
		}
		for _, obj := range sib.Sources.EventlogObjects.Objects {
			o.Elsewhere(sib.Name, domain.SourceEventlogObjects, obj.Name)
		}
		for _, t := range sib.Sources.EventLogFile.EventTypes {
			o.Elsewhere(sib.Name, domain.SourceEventLogFile, t)
		}
	}
	return o
}

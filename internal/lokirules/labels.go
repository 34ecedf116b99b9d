package lokirules

import "slices"

// AllowedLabels are the only stream labels sf2loki sets: everything else
// (user ids, IPs, request ids) belongs in structured metadata, or Loki's
// stream count explodes.
var AllowedLabels = []string{"job", "service_name", "source", "event_type", "sf_org_id", "environment", "org"}

// PerSourceLabels are the allowed labels each source sets on its own
// entries; configuration may not set them statically.
var PerSourceLabels = []string{"source", "event_type"}

// StaticLabels are the allowed labels sink.loki.labels (and an org's
// labels) may set: AllowedLabels less PerSourceLabels.
var StaticLabels = slices.DeleteFunc(slices.Clone(AllowedLabels), func(l string) bool {
	return slices.Contains(PerSourceLabels, l)
})

// IsStatic reports whether label may be set statically: it is one of
// StaticLabels.
func IsStatic(label string) bool { return slices.Contains(StaticLabels, label) }

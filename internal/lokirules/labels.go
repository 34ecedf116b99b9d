package lokirules

// AllowedLabels are the only stream labels sf2loki sets: everything else
// (user ids, IPs, request ids) belongs in structured metadata, or Loki's
// stream count explodes.
var AllowedLabels = []string{"job", "service_name", "source", "event_type", "sf_org_id", "environment", "org"}

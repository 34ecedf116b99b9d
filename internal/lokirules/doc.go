// Package lokirules holds the Loki facts that both the configuration's
// validation and the Loki adapter apply: the stream labels sf2loki sets
// itself (AllowedLabels; StaticLabels, those configuration may set) and the extra headers a push may carry
// (HeaderProblem).
//
// Imports: the standard library only (enforced by lint); internal/config and
// the loki adapter stand on it.
package lokirules

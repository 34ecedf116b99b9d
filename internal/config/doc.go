// Package config is the sf2loki configuration model: its fields, defaults,
// loading from YAML and the environment, validation, and the generated
// example, reference and JSON Schema.
//
// Imports: the standard library, configuration libraries, internal/domain
// (and its shape package) and the vendor rules it checks at load
// (internal/sfrules, internal/lokirules, which the adapters apply too);
// never the adapters or app (enforced by lint).
package config

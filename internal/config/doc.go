// Package config is the sf2loki configuration model: its fields, defaults,
// loading from YAML and the environment, validation, and the generated
// example, reference and JSON Schema.
//
// Imports: the standard library, configuration libraries, internal/domain
// (and its shape package) and the adapters whose rules it checks at load
// (salesforce, pubsub); never app.
package config

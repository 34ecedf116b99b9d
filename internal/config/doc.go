// Package config is the sf2loki configuration model: its fields, defaults,
// loading from YAML and the environment, validation, and the generated
// example and reference.
//
// Imports: the standard library, internal/ports and configuration libraries;
// never adapters or app.
package config

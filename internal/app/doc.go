// Package app composes sf2loki: it builds the object graph for the configured
// coordinator and state backend, runs the daemon lifecycle, serves health and
// metrics, and implements the CLI commands. The metrics, spans and event
// log lines themselves are internal/telemetry's.
//
// Imports: anything in the module (domain, ports, adapters, config) and
// third-party libraries. Nothing imports app except cmd/sf2loki.
package app

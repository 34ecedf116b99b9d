// Package app composes sf2loki: it builds the object graph for the configured
// coordinator and state backend (google/wire), runs the daemon lifecycle and
// serves health and metrics, and holds what the commands share (loading the
// configuration, exit codes, an org's shard).
//
// Imports: config, telemetry, the adapters, sfrules, buildinfo, domain and
// ports; never cli, doctor or backfill, which stand on it.
package app

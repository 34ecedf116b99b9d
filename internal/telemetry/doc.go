// Package telemetry owns what sf2loki tells its operators: the Prometheus
// metrics, the trace spans, the OTLP metrics push and the lease-event log
// lines (Recorder, built by New), fed by the domain's events and the
// adapters' counters.
//
// Imports: domain, ports, adapters (their stats types) and buildinfo; never
// config (app maps it onto Settings) nor app or anything above it.
package telemetry

// Package telemetry owns what sf2loki tells its operators: the Prometheus
// metrics, the trace spans, the OTLP metrics push and the lease-event log
// lines (Recorder, built by New), fed by the domain's events and the
// adapters' counters.
//
// Imports: domain, ports, adapters (their stats types), buildinfo and
// config (the telemetry settings); never app or anything above it.
package telemetry

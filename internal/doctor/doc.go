// Package doctor owns sf2loki doctor: the read-only probes of every
// backend, Salesforce, Loki and the telemetry endpoint, and their report.
//
// Imports: app and anything below it; never cli or backfill (cli imports
// doctor).
package doctor

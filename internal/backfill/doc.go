// Package backfill owns sf2loki backfill: loading EventLogFile history into
// Loki, with its own state document, progress lines and locks.
//
// Imports: app and anything below it; never cli or doctor (cli imports
// backfill).
package backfill

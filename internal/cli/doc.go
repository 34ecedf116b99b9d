// Package cli owns sf2loki's command line: the command tree and its usage
// errors, run, check, state, health, config and version.
//
// Imports: doctor, backfill, app and anything below them; nothing imports
// cli except cmd/sf2loki.
package cli

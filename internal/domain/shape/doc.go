// Package shape applies a source's row transforms (hash, mask, drop_field,
// regex_replace, drop_row) and its deterministic sampling to the rows the
// sources read, before a row becomes a Loki entry.
//
// A Shaper is built once per source from its rules, its sample map and the
// salt of its hash rules; For returns the Plan of one event type (the rules
// whose event_types match it and its sample fraction), cached. A nil
// Shaper, and a Plan with no rule and fraction 1, do nothing and cost
// nothing: the sources call them on every row.
//
// Rows are map[string]string (EventLogFile CSV rows) or map[string]any
// (JSON-decoded SOQL records, Avro-decoded Pub/Sub events). A transform
// changes a row's fields only: the sources take a row's time and its
// checkpoint from the row as Salesforce sent it, and a row that is dropped
// or sampled out still moves its checkpoint.
//
// Values that are not strings follow these rules. nil stays nil for every
// action but drop_field (there is nothing to hide). hash hashes the compact
// JSON text of a number, bool or nested value and yields a string. mask
// turns any non-string into "***". regex_replace runs on the JSON text of a
// non-string and yields a string only when the text changed. drop_row
// compares the JSON text of a non-string; a nil or missing field never
// matches. An empty string stays empty under hash and mask.
//
// Values are bytes: a mask never splits a UTF-8 sequence, and a regular
// expression (RE2) matches UTF-8 text.
//
// Imports: the standard library only. It never reads the clock.
package shape

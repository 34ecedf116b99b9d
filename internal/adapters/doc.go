// Package adapters is the home of sf2loki's technology adapters, one
// subpackage per technology: the stores (s3, gcs, file, k8s, and memory for a
// dry run), the Loki sink (loki), the sources (salesforce and its pubsub,
// synthetic), the real clock (clock), and the helpers they share (redact,
// lograte). Each implements a port from internal/ports and translates its
// backend's errors into the ports' sentinels.
//
// Imports: adapters import internal/ports (and may use internal/domain record
// types and internal/domain/shape), their SDKs and other adapters (redact,
// lograte, clock; pubsub builds on salesforce), and the vendor rules they
// share with internal/config (internal/sfrules, internal/lokirules); they
// never import internal/app or internal/config (make lint enforces both).
package adapters

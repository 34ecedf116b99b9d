// Package adapters is the home of sf2loki's technology adapters, one
// subpackage per technology (clock, and later s3, gcs, file, k8s, loki,
// salesforce). Each implements a port from internal/ports and translates
// its backend's errors into the ports' sentinels.
//
// Imports: adapters import internal/ports (and may use internal/domain record
// types) plus their SDKs; they never import internal/app or each other.
package adapters

// Package sfrules holds the Salesforce facts that both the configuration's
// validation and the Salesforce adapters apply: API names, usernames, login
// hosts, topic names, Event Log File types, the Real-Time Event Monitoring
// streams, big objects, the auth modes, private keys and the words for an
// unreadable file.
//
// Imports: the standard library only (enforced by lint); internal/config and
// the adapters (salesforce, pubsub) stand on it.
package sfrules

package sfrules

import "regexp"

var identifier = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// ValidName reports whether s can be an object, field or event type name
// in a query: letters, digits and _ only.
func ValidName(s string) bool { return identifier.MatchString(s) }

var username = regexp.MustCompile(`^[A-Za-z0-9._+\-]+@[A-Za-z0-9.\-]+$`)

// ValidUsername reports whether s can be a username of the ApexLog users
// filter, which puts it in a query: a Salesforce username (e-mail shaped,
// at most 80 characters) of letters, digits and . _ + - around one @.
// Nothing a query would have to escape is accepted.
func ValidUsername(s string) bool { return len(s) <= 80 && username.MatchString(s) }

var topicName = regexp.MustCompile(`^/(event|data)/[A-Za-z0-9_]+$`)

// ValidTopic reports whether t is a Pub/Sub API topic name: /event/<Name>
// or /data/<Name>.
func ValidTopic(t string) bool { return topicName.MatchString(t) }

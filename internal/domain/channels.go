package domain

import "strings"

// Pub/Sub channels that carry the events of other channels (Change Data
// Capture Developer Guide, "Subscription Channels" and "Compose Streams of
// Change Data Capture Notifications with Custom Channels"; Platform Events
// Developer Guide, "Group Platform Events into One Stream with a Custom
// Channel"). Channel names are case-sensitive.
const (
	// StandardChangeChannel carries the change events of every entity
	// selected for Change Data Capture on the org's Change Data Capture
	// page (the standard channel's members), each also delivered on the
	// entity's own channel, /data/<Entity>ChangeEvent.
	StandardChangeChannel = "/data/ChangeEvents"
	// customChannelSuffix ends a custom channel: /data/<Name>__chn for
	// change events, /event/<Name>__chn for platform events. Its members
	// (PlatformEventChannelMember records) are set in the org.
	customChannelSuffix = "__chn"
)

// EntityChangeTopic reports whether topic is a single-entity change event
// channel, /data/<Entity>ChangeEvent (AccountChangeEvent for Account,
// Employee__ChangeEvent for Employee__c), and returns its change event's
// name (AccountChangeEvent).
func EntityChangeTopic(topic string) (event string, ok bool) {
	event, ok = strings.CutPrefix(topic, "/data/")
	if !ok || strings.Contains(event, "/") || !strings.HasSuffix(event, "ChangeEvent") || event == "ChangeEvent" {
		return "", false
	}
	return event, true
}

// CustomChannel reports whether topic is a custom channel, /data/<Name>__chn
// or /event/<Name>__chn, and returns its name (<Name>__chn, as a
// PlatformEventChannelMember's EventChannel names it) and whether it is a
// Change Data Capture channel (/data/).
func CustomChannel(topic string) (name string, data bool, ok bool) {
	rest, data := strings.CutPrefix(topic, "/data/")
	if !data {
		if rest, ok = strings.CutPrefix(topic, "/event/"); !ok {
			return "", false, false
		}
	}
	if strings.Contains(rest, "/") || !strings.HasSuffix(rest, customChannelSuffix) || rest == customChannelSuffix {
		return "", false, false
	}
	return rest, data, true
}

// ChannelCarries reports whether Pub/Sub topic outer carries every event
// topic inner carries, as far as the names tell: the standard channel
// /data/ChangeEvents carries each /data/<Entity>ChangeEvent's events when
// the entity is selected on the Change Data Capture page, which is why one
// subscribes to the entity's channel. A custom channel's members are in the
// org, not in the names: it is never said to carry anything here.
func ChannelCarries(outer, inner string) bool {
	_, entity := EntityChangeTopic(inner)
	return outer == StandardChangeChannel && entity
}

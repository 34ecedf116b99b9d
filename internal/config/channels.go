package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sf2loki/sf2loki/internal/domain"
)

// Pub/Sub channels that carry other channels' events (docs/governance.md,
// Channels that hold other channels): the standard channel
// /data/ChangeEvents carries every /data/<Entity>ChangeEvent of an entity
// selected for Change Data Capture, so the two in one org are refused like
// one category on two sources; a custom channel (…__chn) carries what its
// members, set in the org, select, so the configuration only warns.

// CustomChannelAdvice ends every warning about a custom channel: the
// doctor, which reads the channel's members, says it in its channel rows
// instead.
const CustomChannelAdvice = "sf2loki doctor reads the channel's members and names what both would ship"

// checkStandardChannel refuses, in each org without sources.allow_overlap,
// /data/ChangeEvents beside a single-entity change channel: every change
// of that entity would be shipped twice.
func checkStandardChannel(orgs []orgSection, add func(path, format string, args ...any)) {
	for _, o := range orgs {
		topics := o.src.PubSub.Topics
		if o.src.AllowOverlap || !slices.Contains(topics, domain.StandardChangeChannel) {
			continue
		}
		for _, t := range topics {
			if event, ok := domain.EntityChangeTopic(t); ok && domain.ChannelCarries(domain.StandardChangeChannel, t) {
				add(o.prefix+"sources.pubsub.topics", "%q and %q would ship the same change twice: the standard channel %s carries the change events "+
					"of every entity selected for Change Data Capture, %s among them; keep one, or set %ssources.allow_overlap: true",
					domain.StandardChangeChannel, t, domain.StandardChangeChannel, event, o.prefix)
			}
		}
	}
}

// standardChannelPair is the refusal of l beside e, another entry's topic
// of the same org (checkSameOrgNames), when one channel carries the other;
// "" when neither does.
func standardChannelPair(l, e listed, same func(j, i int) string) string {
	if l.source != domain.SourcePubSub || e.source != domain.SourcePubSub {
		return ""
	}
	outer, inner := e.name, l.name
	if !domain.ChannelCarries(outer, inner) {
		outer, inner = inner, outer
	}
	if !domain.ChannelCarries(outer, inner) {
		return ""
	}
	event, _ := domain.EntityChangeTopic(inner)
	return fmt.Sprintf("%q and %q, which %s lists as %s, would ship the same change twice: the standard channel %s carries the change events "+
		"of every entity selected for Change Data Capture, %s among them, and both shards would ship it; keep one, or set sources.allow_overlap: true in both entries",
		l.name, e.name, same(e.entry, l.entry), e.key, domain.StandardChangeChannel, event)
}

// ChannelPeer is a Pub/Sub topic that may carry what a custom channel
// carries: a topic of the same kind (/data/ or /event/, "*" for the
// latter) in the channel's orgs entry or in another entry of its org.
type ChannelPeer struct {
	// Entry is the other orgs entry that lists Topic; "" for the
	// channel's own.
	Entry string
	Topic string
}

// String is the peer as messages name it.
func (p ChannelPeer) String() string {
	if p.Entry == "" {
		return fmt.Sprintf("%q", p.Topic)
	}
	return fmt.Sprintf("%q (orgs entry %q)", p.Topic, p.Entry)
}

// ChannelPeers are, for each custom channel src subscribes to (in the
// order listed), the topics beside it that may carry the same events:
// src's own unless src.AllowOverlap, another entry's unless both entries
// allow the overlap. A channel with no peer is left out.
func ChannelPeers(src Sources, siblings []OrgSibling) map[string][]ChannelPeer {
	out := map[string][]ChannelPeer{}
	for _, ch := range src.PubSub.Topics {
		_, data, ok := domain.CustomChannel(ch)
		if !ok {
			continue
		}
		peer := func(t string) bool {
			if t == ch {
				return false
			}
			if data {
				return strings.HasPrefix(t, "/data/")
			}
			return t == "*" || strings.HasPrefix(t, "/event/")
		}
		var peers []ChannelPeer
		if !src.AllowOverlap {
			for _, t := range src.PubSub.Topics {
				if peer(t) {
					peers = append(peers, ChannelPeer{Topic: t})
				}
			}
		}
		for _, sib := range siblings {
			if src.AllowOverlap && sib.Sources.AllowOverlap {
				continue
			}
			for _, t := range sib.Sources.PubSub.Topics {
				if peer(t) || t == ch {
					peers = append(peers, ChannelPeer{Entry: sib.Name, Topic: t})
				}
			}
		}
		if len(peers) > 0 {
			out[ch] = peers
		}
	}
	return out
}

// channelWarnings warns about each custom channel subscribed beside
// topics that may carry the same events: what the channel carries is set
// in the org.
func (c *Config) channelWarnings(orgs []orgSection) []string {
	var out []string
	for i, o := range orgs {
		var siblings []OrgSibling
		if i > 0 { // orgs[i-1] (orgSections puts the top level first)
			siblings = c.siblingsOf(i - 1)
		}
		peers := ChannelPeers(o.src, siblings)
		for _, ch := range o.src.PubSub.Topics {
			ps, ok := peers[ch]
			if !ok {
				continue
			}
			delete(peers, ch) // a channel listed twice is refused elsewhere
			names := make([]string, len(ps))
			for k, p := range ps {
				names[k] = p.String()
			}
			_, data, _ := domain.CustomChannel(ch)
			what := "the platform events (custom ones, or Real-Time Event Monitoring streams)"
			if data {
				what = "the change events of the entities"
			}
			out = append(out, fmt.Sprintf("%ssources.pubsub.topics: %q is a custom channel: it carries %s its members (PlatformEventChannelMember) select in the org, "+
				"which the configuration cannot see; if it carries what %s beside it carries, each such event is shipped twice. "+
				"Keep each event on one subscription, or set sources.allow_overlap: true if that is wanted; %s",
				o.prefix, ch, what, strings.Join(names, ", "), CustomChannelAdvice))
		}
	}
	return out
}

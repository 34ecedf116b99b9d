package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
)

// shipped is a name the org's sources ship beside a custom channel: the
// channel's own entry's (unless it allows the overlap) and its sibling
// entries' (unless both allow it).
type shipped struct {
	entry  string // the sibling orgs entry, "" for the channel's own
	source string // domain.SourcePubSub, …
	key    string // sources.pubsub.topics, …
	name   string
}

func (s shipped) String() string {
	where := s.key
	if s.entry != "" {
		where = fmt.Sprintf("orgs entry %q's %s", s.entry, s.key)
	}
	return fmt.Sprintf("%s %q", where, s.name)
}

// shippedBeside are the names a custom channel of cfg's org is compared
// with.
func shippedBeside(cfg *config.Config) []shipped {
	var out []shipped
	add := func(entry string, src config.Sources) {
		for _, t := range src.PubSub.Topics {
			out = append(out, shipped{entry, domain.SourcePubSub, "sources.pubsub.topics", t})
		}
		for _, o := range src.EventlogObjects.Objects {
			out = append(out, shipped{entry, domain.SourceEventlogObjects, "sources.eventlog_objects.objects", o.Name})
		}
		for _, t := range src.EventLogFile.EventTypes {
			out = append(out, shipped{entry, domain.SourceEventLogFile, "sources.eventlogfile.event_types", t})
		}
	}
	if !cfg.Sources.AllowOverlap {
		add("", cfg.Sources)
	}
	for _, sib := range cfg.OrgSiblings {
		if !cfg.Sources.AllowOverlap || !sib.Sources.AllowOverlap {
			add(sib.Name, sib.Sources)
		}
	}
	return out
}

// relevant are the names in beside that may ship what custom channel ch
// carries: the org's other change event topics for a /data/ channel; for
// an /event/ one, its other platform event topics, a "*", and the names
// with an event category (a Real-Time Event Monitoring stream in the
// channel is its category's).
func relevant(ch string, beside []shipped) []shipped {
	_, data, _ := domain.CustomChannel(ch)
	var out []shipped
	for _, s := range beside {
		switch {
		case s.entry == "" && s.source == domain.SourcePubSub && s.name == ch:
		case s.source == domain.SourcePubSub && data:
			if strings.HasPrefix(s.name, "/data/") {
				out = append(out, s)
			}
		case s.source == domain.SourcePubSub:
			if s.name == "*" || strings.HasPrefix(s.name, "/event/") {
				out = append(out, s)
			}
		case !data:
			if _, ok := domain.Category(s.source, s.name); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// checkChannels reads the members of each custom channel (…__chn) the org
// subscribes to, with the Tooling API, and compares them with what the
// org's other subscriptions and sources ship: a row channel:<topic> each,
// WARN naming every event the channel would ship a second time, or when
// its members cannot be read. Nothing when no custom channel is
// subscribed beside something that may ship the same events (with the
// overlap allowed, only other entries of the org are compared with).
func checkChannels(ctx context.Context, cfg *config.Config, a *salesforce.Auth) []Check {
	beside := shippedBeside(cfg)
	var channels []string
	peers := map[string][]shipped{}
	for _, t := range cfg.Sources.PubSub.Topics {
		if _, _, ok := domain.CustomChannel(t); ok && !slices.Contains(channels, t) {
			if r := relevant(t, beside); len(r) > 0 {
				channels, peers[t] = append(channels, t), r
			}
		}
	}
	if len(channels) == 0 {
		return nil
	}
	list := strings.Join(channels, ", ")
	if a == nil {
		return []Check{{"channels", Skip, fmt.Sprintf("the auth check did not pass: the members of %s cannot be read, so whether the channel ships what is shipped beside it is not checked", list)}}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	members, err := salesforce.ChannelMembers(ctx, a, cfg.Salesforce.APIVersion)
	if err != nil {
		var all []shipped
		for _, ch := range channels {
			all = append(all, peers[ch]...)
		}
		return []Check{{"channels", Warn, fmt.Sprintf("cannot read the members of %s with the Tooling API: %s (%v); whether the channel ships what is shipped beside it "+
			"could not be checked: make sure none of its members is also shipped by %s",
			list, app.SalesforceProblem(err, "the user needs View Setup and Configuration (and API Enabled) to query PlatformEventChannel and PlatformEventChannelMember"), err, besideList(all))}}
	}
	out := make([]Check, 0, len(channels))
	for _, ch := range channels {
		out = append(out, channelRow(ch, members, peers[ch]))
	}
	return out
}

// channelRow compares the members of custom channel ch with what is
// shipped beside it.
func channelRow(ch string, members map[string][]string, beside []shipped) Check {
	name, data, _ := domain.CustomChannel(ch)
	own := members[name]
	if len(own) == 0 {
		return Check{"channel:" + ch, Warn, fmt.Sprintf("PlatformEventChannelMember lists no member of %s: the channel is empty or missing (channel names are case-sensitive), "+
			"or the org names it in a way sf2loki does not recognise; whether it ships what %s ships could not be checked", name, besideList(beside))}
	}
	var found []string
	for _, e := range own {
		for _, s := range beside {
			if why := carriedBy(e, data, s, members); why != "" {
				found = append(found, why)
			}
		}
	}
	if len(found) == 0 {
		return Check{"channel:" + ch, Pass, fmt.Sprintf("carries %s: none of them is shipped beside it (%s)", strings.Join(own, ", "), besideList(beside))}
	}
	return Check{"channel:" + ch, Warn, fmt.Sprintf("carries %s; %s: the same events would be shipped twice; remove the member from the channel, "+
		"drop the other subscription, or set sources.allow_overlap: true (in both entries when another entry ships it)", strings.Join(own, ", "), strings.Join(found, "; "))}
}

// carriedBy says how s ships entity e too, a member of a change event
// channel (data) or a platform event channel; "" when it does not.
func carriedBy(e string, data bool, s shipped, members map[string][]string) string {
	if s.source != domain.SourcePubSub {
		// A Real-Time Event Monitoring stream in a platform event channel
		// is its category's, like the topic /event/<stream>.
		cat, ok := domain.Category(domain.SourcePubSub, "/event/"+e)
		if other, same := domain.Category(s.source, s.name); !data && ok && same && other == cat {
			return fmt.Sprintf("%s is the %s category, which %s ships too", e, cat, s)
		}
		return ""
	}
	prefix := "/event/"
	if data {
		prefix = "/data/"
	}
	switch other, _, custom := domain.CustomChannel(s.name); {
	case s.name == prefix+e:
		return fmt.Sprintf("%s is also subscribed to as %s", e, s)
	case !data && s.name == "*" && strings.HasSuffix(e, "EventStream"):
		return fmt.Sprintf("%s is also subscribed to by %s (every …EventStream topic)", e, s)
	case data && s.name == domain.StandardChangeChannel && slices.Contains(members[salesforce.StandardChannel], e):
		return fmt.Sprintf("%s is also selected on the standard channel (the Change Data Capture page), which %s carries", e, s)
	case custom && strings.HasPrefix(s.name, prefix) && slices.Contains(members[other], e):
		return fmt.Sprintf("%s is also a member of %s", e, s)
	}
	return ""
}

// besideList names what is shipped beside a channel.
func besideList(beside []shipped) string {
	names := make([]string, len(beside))
	for i, s := range beside {
		names[i] = s.String()
	}
	return strings.Join(names, ", ")
}

package config

import (
	"cmp"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/domain"
)

// One Salesforce org may be listed under two names in orgs, with different
// sources (Pub/Sub in one entry, EventLogFile in the other), to spread a
// big org over shards. Each shard is led by whichever replica wins its
// lease, so nothing at run time sees both entries: the configuration is
// where a name listed in both, or a "*" that would list the other entry's
// names, is refused, and each shard learns its sibling entries' names
// (Config.OrgSiblings) so that its "*" discoveries skip their categories.

// OrgSibling is another orgs entry of the same Salesforce org.
type OrgSibling struct {
	Name    string
	Sources Sources
}

// orgIdentities are the keys that name the Salesforce org an entry logs in
// to, each with how the configuration shows it: a set org_id (its
// case-sensitive first 15 characters), a jwt_bearer username (a Salesforce
// username belongs to one org), and a My Domain login host (one org's).
// Generic login hosts and loopback test servers name no org; auth_mode
// none has no org.
func orgIdentities(sf Salesforce) (keys, shown []string) {
	if sf.AuthMode == "none" {
		return nil, nil
	}
	if id := strings.TrimSpace(sf.OrgID); id != "" {
		keys, shown = append(keys, "org_id "+id[:min(len(id), 15)]), append(shown, fmt.Sprintf("salesforce.org_id %q", id))
	}
	if u := strings.TrimSpace(sf.Username); sf.AuthMode == "jwt_bearer" && u != "" {
		keys, shown = append(keys, "username "+strings.ToLower(u)), append(shown, fmt.Sprintf("salesforce.username %q", u))
	}
	if u, err := url.Parse(sf.SalesforceLoginURL()); err == nil {
		if h := strings.ToLower(u.Hostname()); h != "" && !salesforce.GenericLoginHost(h) && !loopback(h) {
			keys, shown = append(keys, "host "+h), append(shown, "the login host "+h)
		}
	}
	return keys, shown
}

// sameOrgGroups are the orgs entries that log in to one Salesforce org,
// as groups of two or more indexes in list order, each with why (the
// first identity a later entry shares with an earlier one, as the earlier
// one shows it).
func (c *Config) sameOrgGroups() (groups [][]int, why []string) {
	parent := make([]int, len(c.Orgs))
	reason := make([]string, len(c.Orgs))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			i = parent[i]
		}
		return i
	}
	type seen struct {
		entry int
		shown string
	}
	first := map[string]seen{}
	for i, o := range c.Orgs {
		keys, shown := orgIdentities(o.Salesforce)
		for k, key := range keys {
			f, ok := first[key]
			if !ok {
				first[key] = seen{i, shown[k]}
				continue
			}
			if a, b := find(f.entry), find(i); a != b {
				root, child := min(a, b), max(a, b)
				parent[child] = root
				reason[root] = cmp.Or(reason[root], reason[child], f.shown)
			}
		}
	}
	byRoot := map[int][]int{}
	for i := range c.Orgs {
		byRoot[find(i)] = append(byRoot[find(i)], i)
	}
	for i := range c.Orgs {
		if g := byRoot[i]; len(g) > 1 {
			groups, why = append(groups, g), append(why, reason[i])
		}
	}
	return groups, why
}

// siblingsOf are the other orgs entries of org i's Salesforce org.
func (c *Config) siblingsOf(i int) []OrgSibling {
	groups, _ := c.sameOrgGroups()
	for _, g := range groups {
		if !slices.Contains(g, i) {
			continue
		}
		var out []OrgSibling
		for _, j := range g {
			if j != i {
				src := deepCopy(reflect.ValueOf(c.Orgs[j].Sources)).Interface().(Sources)
				out = append(out, OrgSibling{Name: c.Orgs[j].Name, Sources: src})
			}
		}
		return out
	}
	return nil
}

// listed is one name an entry's sources list.
type listed struct {
	entry       int
	source, key string // key: the path under the entry, e.g. sources.pubsub.topics
	name        string
}

// listedNames are the names org entry i's sources list, "*" included.
func listedNames(i int, src Sources) []listed {
	var out []listed
	for _, t := range src.PubSub.Topics {
		out = append(out, listed{i, domain.SourcePubSub, "sources.pubsub.topics", t})
	}
	for k, obj := range src.EventlogObjects.Objects {
		out = append(out, listed{i, domain.SourceEventlogObjects, fmt.Sprintf("sources.eventlog_objects.objects[%d].name", k), obj.Name})
	}
	for _, t := range src.EventLogFile.EventTypes {
		out = append(out, listed{i, domain.SourceEventLogFile, "sources.eventlogfile.event_types", t})
	}
	return out
}

// checkSameOrg refuses, among the orgs entries of one Salesforce org, what
// would ship an event twice: a name two entries list; one event category
// on two entries (unless the org's entries set sources.allow_overlap,
// which must be the same in all of them); a "*" on a
// source another entry lists names for, or "*"s in two entries (a "*"
// defers to the other sources of its own entry only); the Apex debug logs
// of one user in two entries.
func (c *Config) checkSameOrg(add func(path, format string, args ...any)) {
	groups, why := c.sameOrgGroups()
	for g, group := range groups {
		same := func(j int) string {
			return fmt.Sprintf("orgs[%d] %q, the same Salesforce org (%s)", j, c.Orgs[j].Name, why[g])
		}
		var names []listed
		wildcard := map[int][]string{} // entry -> its "*" sources
		for _, i := range group {
			for _, l := range listedNames(i, c.Orgs[i].Sources) {
				if l.name == "*" {
					wildcard[i] = append(wildcard[i], l.source)
					continue
				}
				names = append(names, l)
			}
		}
		for _, i := range group[1:] {
			if a := c.Orgs[i].Sources.AllowOverlap; a != c.Orgs[group[0]].Sources.AllowOverlap {
				add(fmt.Sprintf("orgs[%d].sources.allow_overlap", i), "%v here, %v in %s: set it the same in every entry of one org "+
					"(it says whether one event category may be shipped twice, whichever entry ships it)", a, !a, same(group[0]))
			}
		}
		c.checkSameOrgNames(names, same, add)
		c.checkSameOrgWildcards(group, wildcard, same, add)
		c.checkSameOrgApexLogs(group, same, add)
	}
}

// checkSameOrgNames refuses a name, or a category, listed by two entries
// of one org.
func (c *Config) checkSameOrgNames(names []listed, same func(int) string, add func(path, format string, args ...any)) {
	for k, l := range names {
		cat, categorised := domain.Category(l.source, l.name)
		for _, e := range names[:k] {
			if e.entry == l.entry {
				continue
			}
			path := fmt.Sprintf("orgs[%d].%s", l.entry, l.key)
			if e.source == l.source && strings.EqualFold(e.name, l.name) {
				add(path, "%q is also listed by %s: both shards would ship its events; keep it in one entry", l.name, same(e.entry))
				break
			}
			if other, ok := domain.Category(e.source, e.name); ok && categorised && other == cat &&
				(!c.Orgs[e.entry].Sources.AllowOverlap || !c.Orgs[l.entry].Sources.AllowOverlap) {
				add(path, "%q is the %s category, which %s lists as %s %q: both shards would ship the same %s events; "+
					"keep one, or set sources.allow_overlap: true in every entry of the org", l.name, cat, same(e.entry), e.key, e.name, cat)
				break
			}
		}
	}
}

// checkSameOrgWildcards refuses a "*" on a source another entry of the org
// lists names for, and "*"s in two entries.
func (c *Config) checkSameOrgWildcards(group []int, wildcard map[int][]string, same func(int) string, add func(path, format string, args ...any)) {
	var first = -1
	for _, i := range group {
		if len(wildcard[i]) == 0 {
			continue
		}
		if first >= 0 {
			add(fmt.Sprintf("orgs[%d].sources", i), `"*" in %s too: two entries' "*" listings would each ingest what the other discovers; `+
				`put every "*" of the org in one entry (there Pub/Sub's "*" goes first and EventLogFile's takes the rest)`, same(first))
			continue
		}
		first = i
		for _, j := range group {
			if j == i {
				continue
			}
			for _, source := range wildcard[i] {
				if slices.ContainsFunc(listedNames(j, c.Orgs[j].Sources), func(l listed) bool { return l.source == source }) {
					add(fmt.Sprintf("orgs[%d].sources.%s", i, source), `"*" lists every name of the org, also those %s lists for sources.%s: `+
						"both shards would ship them; list the names in one entry, or keep sources.%s in this one", same(j), source, source)
				}
			}
		}
	}
}

// checkSameOrgApexLogs refuses the debug logs of one user (or all users)
// shipped by two entries of the org.
func (c *Config) checkSameOrgApexLogs(group []int, same func(int) string, add func(path, format string, args ...any)) {
	for k, i := range group {
		a := c.Orgs[i].Sources.ApexLog
		if !a.Enabled {
			continue
		}
		for _, j := range group[:k] {
			b := c.Orgs[j].Sources.ApexLog
			if !b.Enabled {
				continue
			}
			shared := len(a.Users) == 0 || len(b.Users) == 0 || slices.ContainsFunc(a.Users, func(u string) bool {
				return slices.ContainsFunc(b.Users, func(v string) bool { return strings.EqualFold(u, v) })
			})
			if shared {
				add(fmt.Sprintf("orgs[%d].sources.apexlog", i), "enabled in %s too, for users that overlap (an empty users list is every user): "+
					"both shards would ship the same debug logs; enable it in one entry, or give each entry its own users", same(j))
				break
			}
		}
	}
}

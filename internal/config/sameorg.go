package config

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/sf2loki/sf2loki/internal/domain"
)

// One Salesforce org may be listed under two names in orgs, with different
// sources (Pub/Sub in one entry, EventLogFile in the other), to spread a
// big org over shards. Each shard is led by whichever replica wins its
// lease, so nothing at run time sees both entries: the configuration is
// where a name listed in both, or a "*" nothing keeps from the other
// entry's names, is refused, and each shard learns its sibling entries'
// names (Config.OrgSiblings) so that its "*" discoveries skip their
// categories.

// OrgSibling is another orgs entry of the same Salesforce org.
type OrgSibling struct {
	Name    string
	Sources Sources
}

// identity is what names the Salesforce org an orgs entry logs in to.
type identity struct {
	keys  []string // comparable: "org_id 00D...", "username ...", "host ..."
	shown []string // each key as the configuration shows it
	orgID string   // the org id's 15-character form, "" when unset or malformed
}

// myDomainSuffix ends every My Domain host, production and sandbox
// (acme.my.salesforce.com, acme--uat.sandbox.my.salesforce.com): each
// names one org. Instance hosts (na139.salesforce.com), the generic login
// hosts, proxies and loopback test servers are shared or unknown.
const myDomainSuffix = ".my.salesforce.com"

// orgIdentityOf is the identity of an entry: its org id (salesforce.org_id,
// 15 or 18 characters), its jwt_bearer username (a Salesforce username
// belongs to one org; its case does not matter) and its My Domain login
// host. auth_mode none names no org.
func orgIdentityOf(sf Salesforce) identity {
	var id identity
	if sf.AuthMode == "none" {
		return id
	}
	if raw := strings.TrimSpace(sf.OrgID); raw != "" {
		if c15, ok := orgID15(raw); ok {
			id.orgID = c15
			id.keys, id.shown = append(id.keys, "org_id "+c15), append(id.shown, fmt.Sprintf("salesforce.org_id %q", raw))
		}
	}
	if u := strings.TrimSpace(sf.Username); sf.AuthMode == "jwt_bearer" && u != "" {
		id.keys, id.shown = append(id.keys, "username "+strings.ToLower(u)), append(id.shown, fmt.Sprintf("salesforce.username %q", u))
	}
	if u, err := url.Parse(sf.SalesforceLoginURL()); err == nil {
		if h := strings.TrimSuffix(strings.ToLower(u.Hostname()), "."); strings.HasSuffix(h, myDomainSuffix) {
			id.keys, id.shown = append(id.keys, "host "+h), append(id.shown, "the My Domain "+h)
		}
	}
	return id
}

// orgID15 is an org id's case-sensitive 15-character form. An 18-character
// id carries, in its last three characters, which of the first fifteen
// are upper case (five each, a bit per character in the alphabet A-Z0-5),
// so it is compared whatever case it was written in.
func orgID15(id string) (string, bool) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ012345"
	for _, r := range id {
		if (r < '0' || r > '9') && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return "", false
		}
	}
	switch len(id) {
	case 15:
		return id, true
	case 18:
	default:
		return "", false
	}
	out := []byte(strings.ToLower(id[:15]))
	for chunk := range 3 {
		bits := strings.IndexByte(alphabet, strings.ToUpper(id[15+chunk : 16+chunk])[0])
		if bits < 0 {
			return "", false
		}
		for i := range 5 {
			if bits>>i&1 == 1 {
				out[chunk*5+i] = strings.ToUpper(string(out[chunk*5+i]))[0]
			}
		}
	}
	return string(out), true
}

// sameOrg is how the orgs entries group into Salesforce orgs.
type sameOrg struct {
	ids    []identity
	groups [][]int // two or more entries of one org, in list order
	// conflicts, by group, is a pair (earlier, later) of its entries that
	// set different org ids, or {-1, -1}: a group joined by a shared key
	// yet holding two org ids has a wrong setting.
	conflicts [][2]int
}

// sameOrgs groups the orgs entries that share an identity key, directly or
// through other entries.
func (c *Config) sameOrgs() sameOrg {
	s := sameOrg{ids: make([]identity, len(c.Orgs))}
	parent := make([]int, len(c.Orgs))
	for i, o := range c.Orgs {
		parent[i], s.ids[i] = i, orgIdentityOf(o.Salesforce)
	}
	find := func(i int) int {
		for parent[i] != i {
			i = parent[i]
		}
		return i
	}
	for i := range c.Orgs {
		for j := range i {
			if _, ok := s.shared(j, i); !ok {
				continue
			}
			if a, b := find(j), find(i); a != b {
				parent[max(a, b)] = min(a, b)
			}
		}
	}
	byRoot := map[int][]int{}
	for i := range c.Orgs {
		byRoot[find(i)] = append(byRoot[find(i)], i)
	}
	for i := range c.Orgs {
		if g := byRoot[i]; len(g) > 1 {
			s.groups, s.conflicts = append(s.groups, g), append(s.conflicts, s.conflict(g))
		}
	}
	return s
}

// conflict is the first pair of group's entries that set different org
// ids, or {-1, -1}.
func (s sameOrg) conflict(group []int) [2]int {
	for k, i := range group {
		for _, j := range group[:k] {
			if a, b := s.ids[j].orgID, s.ids[i].orgID; a != "" && b != "" && a != b {
				return [2]int{j, i}
			}
		}
	}
	return [2]int{-1, -1}
}

// shared is the first key entries j and i share, as j shows it.
func (s sameOrg) shared(j, i int) (string, bool) {
	for k, key := range s.ids[j].keys {
		if slices.Contains(s.ids[i].keys, key) {
			return s.ids[j].shown[k], true
		}
	}
	return "", false
}

// why says how entries j and i of one group are one org: the key they
// share, or the entry that links them.
func (s sameOrg) why(c *Config, group []int, j, i int) string {
	if shown, ok := s.shared(j, i); ok {
		return shown
	}
	for _, k := range group {
		_, a := s.shared(min(j, k), max(j, k))
		_, b := s.shared(min(i, k), max(i, k))
		if k != i && k != j && a && b {
			return fmt.Sprintf("through orgs[%d] %q", k, c.Orgs[k].Name)
		}
	}
	return "through the entries between them"
}

// siblingsOf are the other orgs entries of org i's Salesforce org.
func (c *Config) siblingsOf(i int) []OrgSibling {
	for _, g := range c.sameOrgs().groups {
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
// would ship an event twice (docs/governance.md): a name two entries list;
// one event category on two sources of two entries (or /data/ChangeEvents
// beside a single-entity change channel), unless both set
// sources.allow_overlap; a "*" where no registry skips the other entries'
// names (allow_overlap) or where the other entry's "*" discovers at the
// same time; the Apex debug logs of one user in two entries. Entries that
// are one org by a shared key, directly or through other entries, yet set
// different org ids are refused as contradictory, and nothing else is
// checked among them.
func (c *Config) checkSameOrg(add func(path, format string, args ...any)) {
	s := c.sameOrgs()
	for g, group := range s.groups {
		if j, i := s.conflicts[g][0], s.conflicts[g][1]; j >= 0 {
			add(fmt.Sprintf("orgs[%d].salesforce.org_id", i), "%q is another org than orgs[%d] %q's %q, yet the login settings make them one org (%s); "+
				"correct the org_id, the username or the login_url", c.Orgs[i].Salesforce.OrgID, j, c.Orgs[j].Name, c.Orgs[j].Salesforce.OrgID, s.why(c, group, j, i))
			continue
		}
		same := func(j, i int) string {
			return fmt.Sprintf("orgs[%d] %q, the same Salesforce org (%s)", j, c.Orgs[j].Name, s.why(c, group, j, i))
		}
		var names []listed
		for _, i := range group {
			names = append(names, listedNames(i, c.Orgs[i].Sources)...)
		}
		c.checkSameOrgNames(names, same, add)
		c.checkSameOrgWildcards(names, same, add)
		c.checkSameOrgApexLogs(group, same, add)
	}
}

// checkSameOrgNames refuses a name two entries of one org list, and one
// category on two sources, or /data/ChangeEvents and a single-entity
// change channel, in two entries unless both allow_overlap.
func (c *Config) checkSameOrgNames(names []listed, same func(j, i int) string, add func(path, format string, args ...any)) {
	for k, l := range names {
		if l.name == "*" {
			continue
		}
		cat, categorised := domain.Category(l.source, l.name)
		for _, e := range names[:k] {
			if e.entry == l.entry || e.name == "*" {
				continue
			}
			path := fmt.Sprintf("orgs[%d].%s", l.entry, l.key)
			if e.source == l.source && strings.EqualFold(e.name, l.name) {
				add(path, "%q is also listed by %s: both shards would ship its events; keep it in one entry", l.name, same(e.entry, l.entry))
				break
			}
			if msg := standardChannelPair(l, e, same); msg != "" && !c.bothAllowOverlap(e.entry, l.entry) {
				add(path, "%s", msg)
				break
			}
			if other, ok := domain.Category(e.source, e.name); ok && categorised && other == cat && e.source != l.source && !c.bothAllowOverlap(e.entry, l.entry) {
				add(path, "%q is the %s category, which %s lists as %s %q: both shards would ship the same %s events; "+
					"keep one, or set sources.allow_overlap: true in both entries", l.name, cat, same(e.entry, l.entry), e.key, e.name, cat)
				break
			}
		}
	}
}

func (c *Config) bothAllowOverlap(j, i int) bool {
	return c.Orgs[j].Sources.AllowOverlap && c.Orgs[i].Sources.AllowOverlap
}

// checkSameOrgWildcards refuses the "*"s no registry keeps apart from the
// other entries of the org. A "*" skips the categories the other entries
// list (Config.OrgSiblings), so what is left: "*" on one source in two
// entries (each ships what both discover); "*" on two sources in two
// entries (neither knows what the other claims) unless both allow_overlap;
// another entry's name a "*" may discover that has no category; and a "*"
// with allow_overlap (no registry) beside another entry's names it may
// discover, or its categorised names on another source unless that entry
// allows the overlap too. Include and exclude filters are not considered.
func (c *Config) checkSameOrgWildcards(names []listed, same func(j, i int) string, add func(path, format string, args ...any)) {
	var stars []listed
	for _, l := range names {
		if l.name == "*" {
			stars = append(stars, l)
		}
	}
	for k, w := range stars {
		path := fmt.Sprintf("orgs[%d].%s", w.entry, w.key)
		for _, e := range stars[:k] {
			switch {
			case e.entry == w.entry:
			case e.source == w.source:
				add(path, `"*" here and in %s: both shards would ship every %s name; keep the "*" in one entry`, same(e.entry, w.entry), w.source)
			case !c.bothAllowOverlap(e.entry, w.entry):
				add(path, `"*" here and a %s "*" in %s: neither shard knows what the other discovers, so both would ship the categories both find; `+
					`put every "*" of the org in one entry (there the Pub/Sub "*" goes first and the EventLogFile "*" takes the rest), or list one side's names`,
					e.source, same(e.entry, w.entry))
			}
		}
		for _, l := range names {
			_, categorised := domain.Category(l.source, l.name)
			switch {
			case l.entry == w.entry || l.name == "*":
				continue
			case l.source == w.source && discoverable(l.source, l.name) && !categorised:
				add(path, `"*" ships %q too, which %s lists and which has no event category to skip it by: both shards would ship it; `+
					`drop it from orgs[%d] (this "*" ships it), or list this entry's names instead of "*"`, l.name, same(l.entry, w.entry), l.entry)
			case !c.Orgs[w.entry].Sources.AllowOverlap:
				continue
			case l.source == w.source && discoverable(l.source, l.name):
				add(path, `"*" with sources.allow_overlap ships every %s name, also %q that %s lists: both shards would ship it; `+
					"leave allow_overlap out here (the \"*\" then skips the other entry's names), or list this source's names instead of \"*\"", w.source, l.name, same(l.entry, w.entry))
			case categorised && !c.Orgs[l.entry].Sources.AllowOverlap:
				add(path, `"*" with sources.allow_overlap skips no category, also not that of %q that %s lists as %s: both shards would ship it; `+
					"leave allow_overlap out here, set it in that entry too, or list this source's names instead of \"*\"", l.name, same(l.entry, w.entry), l.key)
			default:
				continue
			}
			break
		}
	}
}

// discoverable reports whether a "*" on source may list name: every
// EventLogFile type; a Pub/Sub "*" lists the /event/...EventStream topics
// only.
func discoverable(source, name string) bool {
	if source == domain.SourcePubSub {
		return strings.HasPrefix(name, "/event/") && strings.HasSuffix(name, "EventStream")
	}
	return source == domain.SourceEventLogFile
}

// checkSameOrgApexLogs refuses the debug logs of one user (or all users)
// shipped by two entries of the org.
func (c *Config) checkSameOrgApexLogs(group []int, same func(j, i int) string, add func(path, format string, args ...any)) {
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
					"both shards would ship the same debug logs; enable it in one entry, or give each entry its own users", same(j, i))
				break
			}
		}
	}
}

package fakesf

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Channels answers Tooling API queries on the org's event channels as
// Salesforce documents them (Tooling API Developer Guide,
// "PlatformEventChannel", "PlatformEventChannelMember"; Change Data Capture
// Developer Guide, "Get Custom Channels and Channel Members"):
//
//   - GET /services/data/v60.0/tooling/query?q=… (or …/query/?q=…) with a
//     session the org minted (else 401 INVALID_SESSION_ID) parses the
//     query as SOQL (the same parser as Org) over PlatformEventChannel (the
//     custom channels: the standard ChangeEvents channel is none of its
//     rows) and PlatformEventChannelMember (one row per selected entity,
//     the standard channel's too). Only their fields, compared with quoted
//     strings; records carry attributes and the selected fields only;
//     batches follow behind a nextRecordsUrl below /tooling/query/.
//   - A query selecting FullName or Metadata that matches more than one
//     row is refused, as Salesforce refuses it: 400 MALFORMED_QUERY "When
//     retrieving results with Metadata or FullName fields, the query
//     qualifications must specify no more than one row for retrieval.
//     Result size: N".
//   - A user without View Setup and Configuration (Forbidden) is answered
//     400 INVALID_TYPE: the object is not supported for that user.
//   - A member's EventChannel is the channel's name: ChangeEvents for the
//     standard channel, <Name>__chn (with its namespace, ns__<Name>__chn)
//     for a custom one. The documentation does not say whether a custom
//     channel's members give its name or its record Id there:
//     EventChannelIDs answers the custom channel's Id instead.
//   - A member's SelectedEntity is the change event's name
//     (AccountChangeEvent, Employee__ChangeEvent) or the platform event's.
//   - Errors are Salesforce's JSON arrays of {message, errorCode}.
type Channels struct {
	mu       sync.Mutex
	channels []map[string]any
	members  []map[string]any
	// EventChannelIDs makes a custom channel's members carry the channel's
	// Id in EventChannel.
	EventChannelIDs bool
	// Forbidden answers as to a user without View Setup and Configuration.
	Forbidden bool
	// Queries are the queries received (refused ones too), Rejected the
	// refused ones as "ERROR_CODE: message | query".
	Queries, Rejected []string
	pages             pager
}

// channelFields and memberFields are the fields the fake knows, by SOQL
// type (Metadata is a complex field).
var (
	channelFields = map[string]string{"Id": "id", "DeveloperName": "string", "MasterLabel": "string", "ChannelType": "picklist",
		"EventType": "picklist", "NamespacePrefix": "string", "Language": "picklist", "FullName": "string", "Metadata": "complex"}
	memberFields = map[string]string{"Id": "id", "DeveloperName": "string", "MasterLabel": "string", "EventChannel": "string",
		"SelectedEntity": "string", "FilterExpression": "string", "NamespacePrefix": "string", "FullName": "string", "Metadata": "complex"}
)

// AddChannel adds the custom channel name (Sales__chn, ns__Sales__chn) of
// channelType data (change events) or event (platform events), and
// returns its Id.
func (c *Channels) AddChannel(name, channelType string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns, dev := "", strings.TrimSuffix(name, "__chn")
	if before, after, ok := strings.Cut(dev, "__"); ok {
		ns, dev = before, after
	}
	id := fmt.Sprintf("0YL%012dAAA", len(c.channels)+1)
	c.channels = append(c.channels, map[string]any{"Id": id, "DeveloperName": dev, "MasterLabel": dev, "ChannelType": channelType,
		"EventType": nil, "NamespacePrefix": nullable(ns), "Language": "en_US", "FullName": name,
		"Metadata": map[string]any{"channelType": channelType, "label": dev}})
	return id
}

// AddMember selects entity (AccountChangeEvent, Order__e) on channel:
// ChangeEvents for the standard channel, or a custom channel AddChannel
// added.
func (c *Channels) AddMember(channel, entity string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dev := strings.ReplaceAll(channel, "__", "_") + "_" + entity
	c.members = append(c.members, map[string]any{"Id": fmt.Sprintf("0v8%012dAAA", len(c.members)+1), "DeveloperName": dev, "MasterLabel": dev,
		"channel": channel, "SelectedEntity": entity, "FilterExpression": nil, "NamespacePrefix": nil, "FullName": dev,
		"Metadata": map[string]any{"eventChannel": channel, "selectedEntity": entity, "enrichedFields": []any{}, "filterExpression": nil}})
}

// SetForbidden changes Forbidden while the org serves.
func (c *Channels) SetForbidden(f bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Forbidden = f
}

// QueriesSoFar returns the queries received so far.
func (c *Channels) QueriesSoFar() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.Queries)
}

// RejectedSoFar returns the refused queries so far.
func (c *Channels) RejectedSoFar() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.Rejected)
}

// serve answers r if it is a Tooling API query (or one of its locators),
// and reports whether it was; valid tells the sessions the org minted.
func (c *Channels) serve(w http.ResponseWriter, r *http.Request, valid func(session string) bool) bool {
	if c == nil || !strings.HasPrefix(r.URL.Path, toolingQuery) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if session, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || !valid(session) {
		sfError(w, http.StatusUnauthorized, "INVALID_SESSION_ID", "Session expired or invalid")
		return true
	}
	if c.pages.follow(w, r, "60.0/tooling", 2000) {
		return true
	}
	if strings.TrimSuffix(r.URL.Path, "/") != toolingQuery {
		sfError(w, http.StatusNotFound, "NOT_FOUND", "The requested resource does not exist")
		return true
	}
	q := r.URL.Query().Get("q")
	c.Queries = append(c.Queries, q)
	rows, err := c.query(q)
	if err != nil {
		var e *soqlError
		if !errors.As(err, &e) {
			e = &soqlError{"MALFORMED_QUERY", err.Error()}
		}
		c.Rejected = append(c.Rejected, e.code+": "+e.msg+" | "+q)
		sfError(w, http.StatusBadRequest, e.code, e.msg)
		return true
	}
	c.pages.answer(w, "60.0/tooling", rows, 2000)
	return true
}

// query answers one Tooling API query on the channels or their members.
func (c *Channels) query(q string) ([]map[string]any, error) {
	pq, err := parseQuery(q)
	if err != nil {
		return nil, err
	}
	var fields map[string]string
	var stored []map[string]any
	switch pq.object {
	case "PlatformEventChannel":
		fields, stored = channelFields, c.channels
	case "PlatformEventChannelMember":
		fields, stored = memberFields, c.memberRows()
	default:
		return nil, &soqlError{"INVALID_TYPE", fmt.Sprintf("sObject type '%s' is not supported.", pq.object)}
	}
	if c.Forbidden {
		return nil, &soqlError{"INVALID_TYPE", fmt.Sprintf("sObject type '%s' is not supported.", pq.object)}
	}
	return toolingRows(pq, fields, stored, compareField, func(out []map[string]any) error {
		if (slices.Contains(pq.fields, "FullName") || slices.Contains(pq.fields, "Metadata")) && len(out) > 1 {
			return malformed("When retrieving results with Metadata or FullName fields, the query qualifications must specify no more than one row for retrieval. Result size: %d", len(out))
		}
		return nil
	})
}

// memberRows are the members with EventChannel as the query answers it.
func (c *Channels) memberRows() []map[string]any {
	out := make([]map[string]any, len(c.members))
	for i, m := range c.members {
		row := map[string]any{}
		for k, v := range m {
			row[k] = v
		}
		ch, _ := m["channel"].(string)
		row["EventChannel"] = ch
		if c.EventChannelIDs {
			for _, x := range c.channels {
				if x["FullName"] == ch {
					row["EventChannel"] = x["Id"]
				}
			}
		}
		delete(row, "channel")
		out[i] = row
	}
	return out
}

// nullable is s, or nil (JSON null) when it is empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

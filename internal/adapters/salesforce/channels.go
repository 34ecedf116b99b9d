package salesforce

import (
	"context"
	"fmt"
)

// StandardChannel is the standard Change Data Capture channel as a
// PlatformEventChannelMember's EventChannel names it: its members are the
// entities selected on the Change Data Capture page, whose change events
// /data/ChangeEvents carries.
const StandardChannel = "ChangeEvents"

// ChannelMembers reads the org's event channel members with the Tooling
// API (Tooling API Developer Guide, "PlatformEventChannelMember"; the user
// needs View Setup and Configuration): the entities each channel selects
// (AccountChangeEvent, Employee__ChangeEvent, Order__e), by channel name:
// ChangeEvents for the standard channel, <Name>__chn (ns__<Name>__chn in
// a namespace) for a custom one. A member whose EventChannel holds a
// custom channel's record Id rather than its name is filed under the name
// PlatformEventChannel gives that Id. FullName is not selected: the
// Tooling API refuses it in a query answering more than one row.
func ChannelMembers(ctx context.Context, auth *Auth, apiVersion string) (map[string][]string, error) {
	channels, err := ToolingQuery(ctx, auth, apiVersion, "SELECT Id, DeveloperName, NamespacePrefix FROM PlatformEventChannel")
	if err != nil {
		return nil, fmt.Errorf("listing PlatformEventChannel: %w", err)
	}
	byID := map[string]string{}
	for _, c := range channels {
		name := str(c["DeveloperName"]) + "__chn"
		if ns := str(c["NamespacePrefix"]); ns != "" {
			name = ns + "__" + name
		}
		byID[id15(str(c["Id"]))] = name
	}
	rows, err := ToolingQuery(ctx, auth, apiVersion, "SELECT EventChannel, SelectedEntity FROM PlatformEventChannelMember")
	if err != nil {
		return nil, fmt.Errorf("listing PlatformEventChannelMember: %w", err)
	}
	out := map[string][]string{}
	for _, r := range rows {
		ch, entity := str(r["EventChannel"]), str(r["SelectedEntity"])
		if name, ok := byID[id15(ch)]; ok {
			ch = name
		}
		if ch != "" && entity != "" {
			out[ch] = append(out[ch], entity)
		}
	}
	return out, nil
}

// id15 is a record Id's case-sensitive 15-character form (an 18-character
// Id adds a case checksum); anything else is returned as it is.
func id15(id string) string {
	if len(id) == 18 {
		return id[:15]
	}
	return id
}

// str is a JSON string value, "" for null or another type.
func str(v any) string {
	s, _ := v.(string)
	return s
}

package salesforce

import (
	"context"
	"fmt"
	"time"
)

// ToolingQuery runs one SOQL query on the Tooling API's query resource
// (/services/data/vXX.X/tooling/query) with auth and follows
// nextRecordsUrl: the same answers and errors as Query, over the Tooling
// API's objects (ApexLog, TraceFlag).
func ToolingQuery(ctx context.Context, auth *Auth, apiVersion, soql string) ([]map[string]any, error) {
	return queryAt(ctx, auth, fmt.Sprintf("/services/data/v%s/tooling/query", apiVersion), soql)
}

// ActiveTraceFlag reports whether the org has a trace flag that has not
// expired at now: Salesforce writes debug logs only for the users, classes
// and triggers one traces.
func ActiveTraceFlag(ctx context.Context, auth *Auth, apiVersion string, now time.Time) (bool, error) {
	rows, err := ToolingQuery(ctx, auth, apiVersion, "SELECT Id FROM TraceFlag WHERE ExpirationDate > "+literal(now)+" LIMIT 1")
	return len(rows) > 0, err
}

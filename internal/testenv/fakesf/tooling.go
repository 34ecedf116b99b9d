package fakesf

import (
	"fmt"
	"slices"
	"strings"
)

// toolingRows answers a parsed Tooling API query over one object's stored
// rows as the Tooling API does: FIELDS() is not implemented, a field the
// object lacks is INVALID_FIELD, a literal of the wrong type is refused
// (checkTypes), then WHERE, check (a rule of the object's own: nil for
// none), ORDER BY (cmp compares two values of a field), LIMIT; each row
// shaped with its attributes and the fields asked, a relationship field
// (LogUser.Username) as a nested record.
func toolingRows(pq *query, fields map[string]string, stored []map[string]any, cmp func(a, b any) int, check func([]map[string]any) error) ([]map[string]any, error) {
	if pq.fieldsFn != "" {
		return nil, malformed("the fake Tooling API does not implement FIELDS()")
	}
	referenced := append(slices.Clone(pq.fields), fieldsOf(pq.where, nil)...)
	for _, it := range pq.order {
		referenced = append(referenced, it.field)
	}
	for _, f := range referenced {
		if _, ok := fields[f]; !ok {
			return nil, &soqlError{"INVALID_FIELD", fmt.Sprintf("No such column '%s' on entity '%s'.", f, pq.object)}
		}
	}
	if err := checkTypes(pq.where, fields); err != nil {
		return nil, err
	}
	var out []map[string]any
	for _, row := range stored {
		if pq.where == nil || pq.where.eval(row) {
			out = append(out, row)
		}
	}
	if check != nil {
		if err := check(out); err != nil {
			return nil, err
		}
	}
	sortRows(out, pq.order, cmp)
	if pq.limit >= 0 && len(out) > pq.limit {
		out = out[:pq.limit]
	}
	shaped := make([]map[string]any, len(out))
	for i, row := range out {
		rec := map[string]any{"attributes": map[string]any{"type": pq.object,
			"url": fmt.Sprintf("/services/data/v60.0/tooling/sobjects/%s/%v", pq.object, row["Id"])}}
		for _, f := range pq.fields {
			rel, name, nested := strings.Cut(f, ".")
			if !nested {
				rec[f] = row[f]
				continue
			}
			sub, _ := rec[rel].(map[string]any)
			if sub == nil {
				sub = map[string]any{"attributes": map[string]any{"type": "User"}}
				rec[rel] = sub
			}
			sub[name] = row[f]
		}
		shaped[i] = rec
	}
	return shaped, nil
}

package fakesf

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// pager splits query answers into batches linked by nextRecordsUrl, like
// Salesforce's query locators: the first answer carries done=false and the
// locator's URL, each GET of a locator answers the next batch.
type pager struct {
	seq     int
	pending map[string][]map[string]any
	// follows counts the locator GETs answered.
	follows int
}

// answer writes rows, at most batch of them (all when batch is 0), and
// keeps the rest behind a locator.
func (p *pager) answer(w http.ResponseWriter, version string, rows []map[string]any, batch int) {
	page := map[string]any{"totalSize": len(rows), "done": true}
	if batch > 0 && len(rows) > batch {
		if p.pending == nil {
			p.pending = map[string][]map[string]any{}
		}
		p.seq++
		loc := fmt.Sprintf("01gFAKE%011d-%d", p.seq, batch)
		p.pending[loc] = rows[batch:]
		rows = rows[:batch]
		page["done"] = false
		page["nextRecordsUrl"] = fmt.Sprintf("/services/data/v%s/query/%s", version, loc)
	}
	if rows == nil {
		rows = []map[string]any{}
	}
	page["records"] = rows
	_ = json.NewEncoder(w).Encode(page)
}

// follow answers GET /services/data/v<version>/query/<locator> and reports
// whether the request was one.
func (p *pager) follow(w http.ResponseWriter, r *http.Request, version string, batch int) bool {
	loc, ok := strings.CutPrefix(r.URL.Path, "/services/data/v"+version+"/query/")
	if !ok {
		return false
	}
	rows, ok := p.pending[loc]
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprint(w, `[{"errorCode":"INVALID_QUERY_LOCATOR","message":"invalid query locator"}]`)
		return true
	}
	delete(p.pending, loc)
	p.follows++
	p.answer(w, version, rows, batch)
	return true
}

// unavailable answers the 503 Salesforce sends during an incident or
// maintenance.
func unavailable(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = fmt.Fprint(w, `[{"errorCode":"SERVER_UNAVAILABLE","message":"Service temporarily unavailable"}]`)
}

package domain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// OlderOrgPrefix is the key prefix under which the older implementation
// kept each org's positions when several orgs shared its one checkpoint
// document: org=<name>:<key>.
func OlderOrgPrefix(org string) string { return "org=" + org + ":" }

// olderOrgMarker starts every key of the older multi-org layout.
const olderOrgMarker = "org="

// OlderLayout says where an org's positions written by the older
// implementation are. With several orgs, it kept all of them in one
// document (the configured one, which the first org keeps here), each key
// prefixed with OlderOrgPrefix; the first org also read unprefixed keys (a
// deployment grown from one org), and the prefixed key won when both were
// there, as the one it wrote last.
type OlderLayout struct {
	// Document is the configured checkpoint document, read only: never
	// written through this. Nil for the first org, whose own document it is.
	Document ports.ObjectCAS
	// First is set for the first org listed.
	First bool
	// Orgs is how many orgs are configured: the older implementation
	// counted one egress budget for all of them, in the unprefixed
	// egress:budget, which the first org shares out.
	Orgs int
}

// OlderAdoption counts what AdoptOlderLayout did to a document.
type OlderAdoption struct {
	// Adopted is how many keys the document gained from the older layout.
	Adopted int
	// Replaced is how many unprefixed keys of the first org's document the
	// org's prefixed ones replaced (the older implementation read those).
	Replaced int
	// Kept is how many keys the document held already and kept.
	Kept int
	// Budget is set when the deployment's egress count was shared out.
	Budget bool
}

func (a OlderAdoption) any() bool { return a.Adopted+a.Replaced+a.Kept > 0 || a.Budget }

// AdoptOlderLayout merges org's positions from older, a document in the
// older implementation's layout, into own, the org's document in this
// one's (for the first org, own and older are the same document). Call it
// only on a document no shard of this implementation has claimed (no
// OrgKey): after that claim the document's own values are the newer ones,
// and nothing is adopted again.
//
//   - a key org=<org>:<key> of older becomes <key> when own lacks it;
//   - for the first org it also replaces an unprefixed <key> own holds
//     (the older implementation resumed from the prefixed one);
//   - for the first org, its org=<org>:<key> keys are then removed from own
//     (its own document: nobody else reads them), so that they cannot be
//     adopted a second time over newer positions;
//   - keys of other orgs, reserved keys and anything else are left alone,
//     and older is only read;
//   - for the first org of a document in the older multi-org layout (any
//     org= key), egress:budget, the whole deployment's count for the day,
//     becomes its share, the count divided by orgs and rounded up (each
//     other org starts its day's count at 0).
func AdoptOlderLayout(own, older map[string]string, org string, first bool, orgs int) OlderAdoption {
	var a OlderAdoption
	if org == "" {
		return a
	}
	prefix := OlderOrgPrefix(org)
	multi := false
	for k, v := range older {
		if strings.HasPrefix(k, olderOrgMarker) {
			multi = true
		}
		key, ok := strings.CutPrefix(k, prefix)
		if !ok || key == "" || Reserved(key) || strings.HasPrefix(key, olderOrgMarker) {
			continue
		}
		cur, has := own[key]
		switch {
		case !has:
			own[key] = v
			a.Adopted++
		case first && cur != v:
			own[key] = v
			a.Replaced++
		case !first:
			a.Kept++
		}
		if first {
			// The first org's prefixed keys are in its own document and
			// nobody else reads them: gone once adopted, they can never be
			// adopted again over newer positions (a document whose __org__
			// was lost, as after a state export and import).
			delete(own, k)
		}
	}
	if first && multi && orgs > 1 {
		if v, ok := own[EgressKey]; ok {
			var r egressRecord
			if json.Unmarshal([]byte(v), &r) == nil && r.Bytes > 0 {
				r.Bytes = (r.Bytes + int64(orgs) - 1) / int64(orgs)
				b, _ := json.Marshal(r)
				own[EgressKey] = string(b)
				a.Budget = true
			}
		}
	}
	return a
}

// OlderDocumentError is an org's older-layout document that cannot be
// read. It unwraps to ErrCorrupt when the document is corrupt.
type OlderDocumentError struct {
	// Org is the org whose positions were looked for.
	Org string
	// Document names the configured checkpoint document.
	Document string
	// Err is what went wrong.
	Err error
}

func (e *OlderDocumentError) Error() string {
	return fmt.Sprintf("org %s: its positions from the older implementation's layout are read from %s before its first claim, and that failed: %v; "+
		"repair that document (the first org's), or move it aside, which starts every org that has not claimed a document of its own yet from its lookback", e.Org, e.Document, e.Err)
}

// Unwrap returns the cause.
func (e *OlderDocumentError) Unwrap() error { return e.Err }

// olderSource returns the older-layout document to adopt from for own, a
// freshly loaded document of this org that no shard has claimed; nil when
// there is nothing to adopt. c.sem not held.
func (c *CheckpointCommitter) olderSource(ctx context.Context, own map[string]string) (map[string]string, error) {
	if c.older == nil || c.org == "" {
		return nil, nil
	}
	if _, claimed := own[OrgKey]; claimed {
		return nil, nil
	}
	if c.older.Document == nil {
		return own, nil
	}
	req := requester{cas: c.older.Document, clock: c.clock, policy: c.req.policy, timeout: c.req.timeout}
	obj, err := req.get(ctx)
	switch {
	case errors.Is(err, ports.ErrNotFound):
		return nil, nil
	case errors.Is(err, ports.ErrTooLarge):
		return nil, &OlderDocumentError{Org: c.org, Document: c.older.Document.String(),
			Err: &CorruptError{Object: c.older.Document.String(), Problem: err.Error()}}
	case err != nil:
		return nil, &OlderDocumentError{Org: c.org, Document: c.older.Document.String(), Err: err}
	}
	doc, err := decodeDocument(c.older.Document.String(), obj.Data)
	if err != nil {
		return nil, &OlderDocumentError{Org: c.org, Document: c.older.Document.String(), Err: err}
	}
	return doc, nil
}

// adoptInto applies the older layout to doc (a copy being written by a
// claim) when no shard has claimed it yet, and records what it did.
func (c *CheckpointCommitter) adoptInto(doc, older map[string]string, did *OlderAdoption) {
	*did = OlderAdoption{}
	if older == nil {
		return
	}
	if _, claimed := doc[OrgKey]; claimed {
		return
	}
	if c.older.Document == nil {
		older = maps.Clone(doc) // the first org: its own document, as it stands
	}
	*did = AdoptOlderLayout(doc, older, c.org, c.older.First, c.older.Orgs)
}

// logAdoption says once, after the claim that wrote it, what was adopted.
func (c *CheckpointCommitter) logAdoption(did OlderAdoption) {
	if !did.any() {
		return
	}
	from := c.cas.String()
	if c.older.Document != nil {
		from = c.older.Document.String()
	}
	c.log.Info("checkpoints adopted from the older implementation's layout (keys "+OlderOrgPrefix(c.org)+"<key>)",
		"org", c.org, "adopted", did.Adopted, "replaced_unprefixed", did.Replaced, "kept_own", did.Kept,
		"egress_budget_shared", did.Budget, "from", from)
}

package pubsub_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/internal/domain/shape"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
)

// accountLines runs the source on the account topic until n entries came,
// on the fast path and with a transform (the generic path), and returns
// each path's entries.
func accountLines(t *testing.T, n int, events ...map[string]any) map[string][]ports.Entry {
	t.Helper()
	out := map[string][]ports.Entry{}
	for _, path := range []string{"fast", "generic"} {
		spec := pubsub.Spec{Topics: []string{fakepubsub.AccountTopic}, ReplayPreset: pubsub.Earliest}
		if path == "generic" {
			// A transform that touches no field of these events: the
			// line is built from the generic path's record.
			spec.Shaper = shaper(t, shape.Config{Salt: "s", Rules: []shape.Rule{{Action: shape.Mask, Fields: []string{"NoSuchField"}}}})
		}
		e := newEnv(t, spec, nil)
		e.srv.Append(fakepubsub.AccountTopic, events...)
		out[path] = e.run(t, nil, &sink{}, hasN(n))
		out[path+":bitmap"] = make([]ports.Entry, e.count("bitmap"))
		out[path+":gap"] = make([]ports.Entry, e.count("gap"))
	}
	return out
}

func header(t *testing.T, line string) (rec, hdr map[string]any) {
	t.Helper()
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	hdr, _ = rec["ChangeEventHeader"].(map[string]any)
	return rec, hdr
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// An UPDATE as the Pub/Sub API sends it names its changed and nulled
// fields in bitmaps ("0x…" over the top-level positions, "2-0x2" for the
// compound BillingAddress's City): the line names them, compound fields as
// Parent.Child, on both decoding paths. Before, the line carried the
// bitmaps as they came.
func TestAChangeEventNamesItsChangedFields(t *testing.T) {
	ev := fakepubsub.AccountChange(7, t0)
	raw := ev["ChangeEventHeader"].(map[string]any)["changedFields"]
	t.Logf("changedFields as sent: %v", raw)
	got := accountLines(t, 1, ev)
	for _, path := range []string{"fast", "generic"} {
		_, h := header(t, got[path][0].Line)
		if c, want := strs(h["changedFields"]), []string{"Name", "LastModifiedDate", "Rating", "Industry", "BillingAddress.City"}; !slices.Equal(c, want) {
			t.Errorf("%s path: changedFields %v, want %v\n%s", path, c, want, got[path][0].Line)
		}
		if n := strs(h["nulledFields"]); !slices.Equal(n, []string{"Industry"}) {
			t.Errorf("%s path: nulledFields %v, want [Industry]", path, n)
		}
		if d := h["diffFields"].([]any); len(d) != 0 {
			t.Errorf("%s path: diffFields %v, want []", path, d)
		}
		if len(got[path+":bitmap"]) != 0 || got[path][0].Metadata["level"] != "info" {
			t.Errorf("%s path: %d bitmap problems, level %s", path, len(got[path+":bitmap"]), got[path][0].Metadata["level"])
		}
	}
}

// A bitmap the schema does not decode (a position past the schema, a
// nested bitmap on a field that is not compound) is shipped as it came and
// counted; the event is never dropped.
func TestAMalformedBitmapIsKeptAndCounted(t *testing.T) {
	bad := fakepubsub.AccountChange(8, t0)
	bad["ChangeEventHeader"].(map[string]any)["changedFields"] = []any{"0x2", "1-0x1"}
	got := accountLines(t, 2, bad, fakepubsub.AccountChange(9, t0.Add(time.Second)))
	for _, path := range []string{"fast", "generic"} {
		_, h := header(t, got[path][0].Line)
		if c := strs(h["changedFields"]); !slices.Equal(c, []string{"0x2", "1-0x1"}) {
			t.Errorf("%s path: changedFields %v, want the bitmaps as sent", path, c)
		}
		if n := strs(h["nulledFields"]); !slices.Equal(n, []string{"Industry"}) {
			t.Errorf("%s path: nulledFields %v: the other lists still decode", path, n)
		}
		if _, h2 := header(t, got[path][1].Line); strs(h2["changedFields"])[0] != "Name" {
			t.Errorf("%s path: the next event %v", path, h2["changedFields"])
		}
		if n := len(got[path+":bitmap"]); n != 1 {
			t.Errorf("%s path: %d bitmap problems counted, want 1", path, n)
		}
	}
}

// Create, delete and undelete lines carry their body as the Pub/Sub API
// sends it (every field, unchanged ones null, datetimes as epoch
// milliseconds); a gap event (GAP_*: Salesforce could not send the change)
// is shipped at level warn and counted, so that it can be reconciled.
func TestChangeTypesAndGapsAsShipped(t *testing.T) {
	events := []map[string]any{
		fakepubsub.AccountCreate(1, t0),
		fakepubsub.AccountDelete(1, t0.Add(time.Second)),
		fakepubsub.AccountUndelete(1, t0.Add(2*time.Second), t0.AddDate(0, -1, 0)),
	}
	gaps := []string{"GAP_CREATE", "GAP_UPDATE", "GAP_DELETE", "GAP_UNDELETE", "GAP_OVERFLOW"}
	for i, g := range gaps {
		events = append(events, fakepubsub.AccountGap(2+i, g, t0.Add(time.Duration(3+i)*time.Second)))
	}
	got := accountLines(t, len(events), events...)
	for _, path := range []string{"fast", "generic"} {
		for i, en := range got[path] {
			rec, h := header(t, en.Line)
			ct := h["changeType"].(string)
			wantLevel := "info"
			if i >= 3 {
				wantLevel = "warn"
			}
			if en.Metadata["level"] != wantLevel {
				t.Errorf("%s path: %s at level %s, want %s", path, ct, en.Metadata["level"], wantLevel)
			}
			if _, ok := rec["Rating"]; !ok {
				t.Errorf("%s path: %s: every field is on the line, null or not: %s", path, ct, en.Line)
			}
			if ct == "CREATE" {
				if _, isNum := rec["CreatedDate"].(float64); !isNum {
					t.Errorf("%s path: CREATE's CreatedDate %v is not epoch milliseconds", path, rec["CreatedDate"])
				}
			}
		}
		if n := len(got[path+":gap"]); n != len(gaps) {
			t.Errorf("%s path: %d gaps counted, want %d", path, n, len(gaps))
		}
	}
}

package shape_test

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain/shape"
)

// counts records the Shaper's counters.
type counts struct {
	mu       sync.Mutex
	filtered map[string]int
	sampled  map[string]int
}

func newCounts() *counts { return &counts{filtered: map[string]int{}, sampled: map[string]int{}} }

func (c *counts) hook(cfg shape.Config) shape.Config {
	cfg.Filtered = func(rule string) { c.mu.Lock(); c.filtered[rule]++; c.mu.Unlock() }
	cfg.SampledOut = func(et string) { c.mu.Lock(); c.sampled[et]++; c.mu.Unlock() }
	return cfg
}

func mustNew(t testing.TB, cfg shape.Config) *shape.Shaper {
	t.Helper()
	s, err := shape.New("test", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Values computed outside Go (Python's hmac and hashlib), so the hash and
// the sampling rule are pinned to their definitions, not to this code.
const (
	pepperUser  = "118aba19db07f517" // HMAC-SHA-256("pepper", "005000000000001")[:16]
	emptyUser   = "a5131679e2847d09" // HMAC-SHA-256("", "005000000000001")[:16]
	pepper200   = "84694fe71516ccea" // HMAC-SHA-256("pepper", "200")[:16]
	pepperArray = "b72cd5bc4ef0f4e0" // HMAC-SHA-256("pepper", `{"a":1,"b":[true,null]}`)[:16]
	pepperTrue  = "86ae9cdcd577f3dc" // HMAC-SHA-256("pepper", "true")[:16]
)

func TestHashIsTheHMACOfTheSalt(t *testing.T) {
	s := mustNew(t, shape.Config{Salt: "pepper", Rules: []shape.Rule{{Action: shape.Hash, Fields: []string{"USER_ID", "EMPTY"}}}})
	row := map[string]string{"USER_ID": "005000000000001", "EMPTY": "", "OTHER": "005000000000001"}
	if !s.For("API").Strings(row) {
		t.Fatal("a hash rule dropped the row")
	}
	if row["USER_ID"] != pepperUser || row["EMPTY"] != "" || row["OTHER"] != "005000000000001" {
		t.Fatalf("row %v: want USER_ID %s, EMPTY left empty, OTHER untouched", row, pepperUser)
	}
	naive := sha256.Sum256([]byte("pepper005000000000001"))
	if row["USER_ID"] == fmt.Sprintf("%x", naive[:8]) {
		t.Fatal("the hash is sha256(salt+value), not an HMAC")
	}
	unsalted := mustNew(t, shape.Config{Rules: []shape.Rule{{Action: shape.Hash, Fields: []string{"USER_ID"}}}})
	row = map[string]string{"USER_ID": "005000000000001"}
	unsalted.For("API").Strings(row)
	if row["USER_ID"] != emptyUser {
		t.Fatalf("unsalted hash %s, want HMAC with an empty key %s", row["USER_ID"], emptyUser)
	}
}

func TestMask(t *testing.T) {
	s := mustNew(t, shape.Config{Rules: []shape.Rule{{Action: shape.Mask, Fields: []string{"V"}}}})
	for in, want := range map[string]string{
		"jane.doe@acme.com":       "***@acme.com",
		"jöhn@exämple.com":        "***@exämple.com",
		"a@b@c.org":               "***@c.org",
		"@acme.com":               "***",
		"jane@":                   "***",
		"10.1.2.3":                "10.1.2.x",
		"255.255.255.255":         "255.255.255.x",
		"::ffff:192.0.2.7":        "192.0.2.x",
		"2001:db8:1:2:3:4:5:6":    "2001:db8:1::x",
		"2001:0DB8:00AB:ffff::1":  "2001:db8:ab::x",
		"fe80::1%eth0":            "fe80:0:0::x",
		"::1":                     "0:0:0::x",
		"Salesforce.com IP":       "***",
		"10.1.2.3:443":            "***",
		"日本語":                     "***",
		"":                        "",
		"\xff\xfe not utf-8 \xc3": "***",
	} {
		row := map[string]string{"V": in}
		s.For("x").Strings(row)
		if row["V"] != want {
			t.Errorf("mask %q = %q, want %q", in, row["V"], want)
		}
	}
}

// mask keeps a domain only when the whole value is an e-mail address: a
// free-text or URI field holding one ships nothing of its tail.
func TestMaskKeepsNothingOfTextHoldingAnAddress(t *testing.T) {
	s := mustNew(t, shape.Config{Rules: []shape.Rule{{Action: shape.Mask, Fields: []string{"V"}}}})
	for _, in := range []string{
		"alice@acme.com from 198.51.100.7",
		"/services/data/v60.0/query?q=SELECT+Id+FROM+Contact+WHERE+Email='bob@acme.com'+AND+Phone='555-0100'",
		"carol@198.51.100.7",
		"dave@acme.com.",
		"eve@acme..com",
		"frank@acme.com/path",
		"gina @acme.com",
		"hank@localhost",
	} {
		row := map[string]string{"V": in}
		s.For("x").Strings(row)
		if row["V"] != "***" {
			t.Errorf("mask %q = %q, want ***", in, row["V"])
		}
	}
}

func TestDropFieldAndRegexReplace(t *testing.T) {
	s := mustNew(t, shape.Config{Rules: []shape.Rule{
		{Action: shape.DropField, Fields: []string{"SESSION_KEY", "ABSENT"}},
		{Action: shape.RegexReplace, Fields: []string{"URI"}, Pattern: `/(\w+)/[0-9A-Za-z]{15,18}$`, Replacement: "/$1/:id"},
		{Action: shape.RegexReplace, Fields: []string{"NAME"}, Pattern: `ü+`, Replacement: "u"},
	}})
	row := map[string]string{"SESSION_KEY": "k", "URI": "/services/data/v60.0/sobjects/Account/001000000000001AAA", "NAME": "Müüller"}
	s.For("API").Strings(row)
	if _, ok := row["SESSION_KEY"]; ok || row["URI"] != "/services/data/v60.0/sobjects/Account/:id" || row["NAME"] != "Muller" {
		t.Fatalf("row %v", row)
	}
	if _, ok := row["ABSENT"]; ok {
		t.Fatal("drop_field added a field")
	}
}

func TestDropRowNeedsEveryMatchFieldPresentAndMatching(t *testing.T) {
	c := newCounts()
	s := mustNew(t, c.hook(shape.Config{Rules: []shape.Rule{
		{Action: shape.DropRow, Name: "ok-queries", Match: map[string]string{"STATUS_CODE": "2??", "URI": "/services/data/*/query*"}},
	}}))
	p := s.For("API")
	for _, tc := range []struct {
		row  map[string]string
		drop bool
	}{
		{map[string]string{"STATUS_CODE": "200", "URI": "/services/data/v60.0/query?q=x"}, true},
		{map[string]string{"STATUS_CODE": "500", "URI": "/services/data/v60.0/query?q=x"}, false},
		{map[string]string{"STATUS_CODE": "200"}, false}, // URI missing
		{map[string]string{"STATUS_CODE": "2000", "URI": "/services/data/v60.0/query"}, false},
	} {
		if kept := p.Strings(tc.row); kept == tc.drop {
			t.Errorf("row %v: kept %v", tc.row, kept)
		}
	}
	if c.filtered["ok-queries"] != 1 {
		t.Fatalf("filtered counts %v", c.filtered)
	}
	// Decoded records: a number matches by its JSON text; nil never matches.
	v := mustNew(t, c.hook(shape.Config{Rules: []shape.Rule{{Action: shape.DropRow, Match: map[string]string{"Status": "200", "Note": "*"}}}}))
	for _, tc := range []struct {
		rec  map[string]any
		drop bool
	}{
		{map[string]any{"Status": float64(200), "Note": ""}, true},
		{map[string]any{"Status": json.Number("200"), "Note": "x"}, true},
		{map[string]any{"Status": int64(200), "Note": nil}, false},
		{map[string]any{"Status": "200"}, false},
		{map[string]any{"Status": true, "Note": "x"}, false},
	} {
		if kept := v.For("LoginEvent").Values(tc.rec); kept == tc.drop {
			t.Errorf("record %v: kept %v", tc.rec, kept)
		}
	}
	if c.filtered["drop_row#1"] != 2 {
		t.Fatalf("the default rule name: counts %v", c.filtered)
	}
}

func TestValuesThatAreNotStrings(t *testing.T) {
	s := mustNew(t, shape.Config{Salt: "pepper", Rules: []shape.Rule{
		{Action: shape.Hash, Fields: []string{"Code", "Nested", "Nil", "Flag", "Empty"}},
		{Action: shape.Mask, Fields: []string{"Ip", "Count", "Gone"}},
		{Action: shape.RegexReplace, Fields: []string{"Card", "Small"}, Pattern: `\d{4}$`, Replacement: "xxxx"},
	}})
	var nested any
	_ = json.Unmarshal([]byte(`{"b":[true,null],"a":1}`), &nested)
	rec := map[string]any{"Code": float64(200), "Nested": nested, "Nil": nil, "Flag": true, "Empty": "",
		"Ip": int64(167838211), "Count": nil, "Card": float64(4111111111111111), "Small": int64(12), "Other": 1.5}
	s.For("ApiEvent").Values(rec)
	// The card number's JSON text is 4111111111111111: its last four digits
	// are replaced, and the value becomes a string; 12 does not match and
	// stays a number.
	want := map[string]any{"Code": pepper200, "Nested": pepperArray, "Nil": nil, "Flag": pepperTrue, "Empty": "",
		"Ip": "***", "Count": nil, "Card": "411111111111xxxx", "Small": int64(12), "Other": 1.5}
	if !maps.Equal(rec, want) {
		t.Fatalf("record\n%v\nwant\n%v", rec, want)
	}
	if _, ok := rec["Gone"]; ok {
		t.Fatal("mask added a field")
	}
}

func TestFieldGlobs(t *testing.T) {
	s := mustNew(t, shape.Config{Salt: "pepper", Rules: []shape.Rule{
		{Action: shape.Hash, Fields: []string{"USER_*", "USER_ID"}}, // USER_ID twice: hashed once
		{Action: shape.Mask, Fields: []string{"*_IP"}},
		{Action: shape.DropField, Fields: []string{"?ESSION_KEY"}},
	}})
	p := s.For("API")
	for range 3 { // the second and third rows use the cached verdicts
		row := map[string]string{"USER_ID": "005000000000001", "USER_NAME": "", "user_id": "lower", "CLIENT_IP": "10.0.0.1",
			"SOURCE_IP": "2001:db8:1::1", "IP": "1.2.3.4", "SESSION_KEY": "s", "TSESSION_KEY": "t"}
		p.Strings(row)
		want := map[string]string{"USER_ID": pepperUser, "USER_NAME": "", "user_id": "lower", "CLIENT_IP": "10.0.0.x",
			"SOURCE_IP": "2001:db8:1::x", "IP": "1.2.3.4", "TSESSION_KEY": "t"}
		if !maps.Equal(row, want) {
			t.Fatalf("row\n%v\nwant\n%v", row, want)
		}
	}
}

func TestRulesApplyToTheirEventTypes(t *testing.T) {
	s := mustNew(t, shape.Config{Rules: []shape.Rule{
		{Action: shape.DropField, Fields: []string{"A"}, EventTypes: []string{"API", "login*"}},
		{Action: shape.DropField, Fields: []string{"B"}, EventTypes: []string{"/event/*Stream"}},
		{Action: shape.DropField, Fields: []string{"C"}},
	}})
	for et, want := range map[string]string{"API": "B", "api": "B", "Login": "B", "LoginAs": "B", "URI": "AB", "/event/LoginEventStream": "A"} {
		row := map[string]string{"A": "", "B": "", "C": ""}
		s.For(et).Strings(row)
		got := ""
		for _, k := range []string{"A", "B", "C"} {
			if _, ok := row[k]; ok {
				got += k
			}
		}
		if got != want {
			t.Errorf("%s keeps %q, want %q", et, got, want)
		}
	}
	if first := s.For("API"); s.For("API") != first {
		t.Fatal("plans are not cached")
	}
}

func TestTheSampleFractionOfAnEventType(t *testing.T) {
	c := newCounts()
	s := mustNew(t, c.hook(shape.Config{Sample: map[string]float64{
		"ApiEvent": 1, "*Event": 0, "Login*": 0.5, "LoginAs*": 0, "*": 1, "Report": 0,
	}}))
	for et, sampling := range map[string]bool{
		"ApiEvent":     false, // the exact name wins over *Event
		"apievent":     false, // without regard to case
		"LoginEvent":   true,  // *Event and Login* are as long: *Event sorts first (0)
		"LoginHistory": true,  // Login* (0.5)
		"LoginAsEvent": true,  // LoginAs* is the longest
		"Other":        false, // *: keep all
		"report":       true,
	} {
		if got := s.For(et).Sampling(); got != sampling {
			t.Errorf("%s: sampling %v, want %v", et, got, sampling)
		}
	}
	kept := 0
	for i := range 1000 {
		if s.For("LoginHistory").Keep(fmt.Sprint(i)) {
			kept++
		}
	}
	if kept < 400 || kept > 600 {
		t.Fatalf("LoginHistory at 0.5 kept %d of 1000", kept)
	}
	for i := range 10 {
		if s.For("LoginAsEvent").Keep(fmt.Sprint(i)) || !s.For("Other").Keep(fmt.Sprint(i)) {
			t.Fatal("fraction 0 kept a row, or no glob left one out")
		}
	}
	if !s.For("LoginEvent").Sampling() || s.For("LoginEvent").Keep("a") {
		t.Fatal("LoginEvent is not sampled by *Event (0)")
	}
	if c.sampled["LoginAsEvent"] != 10 || c.sampled["LoginHistory"] != 1000-kept || c.sampled["LoginEvent"] != 1 || c.sampled["Other"] != 0 {
		t.Fatalf("sampled-out counts %v", c.sampled)
	}
	if none := mustNew(t, shape.Config{Sample: map[string]float64{"*Event": 0.25}}); none.For("API").Sampling() || !none.For("API").Noop() {
		t.Fatal("an event type no glob matches is sampled")
	}
}

func TestSamplingFollowsTheOlderRuleAndSurvivesARestart(t *testing.T) {
	// The first 8 bytes of SHA-256(key), big-endian, modulo 10000 (Python):
	// a=2250, REQ-1=7649, 0AT000000000001=9359, 00000000000000a1=3610, 42=2637.
	cfg := shape.Config{Sample: map[string]float64{"API": 0.2638}}
	a := mustNew(t, cfg).For("API")
	for key, kept := range map[string]bool{"a": true, "REQ-1": false, "0AT000000000001": false, "00000000000000a1": false, "42": true} {
		if a.Keep(key) != kept {
			t.Errorf("%s: kept %v, want %v", key, !kept, kept)
		}
	}
	// 0.2637 × 10000 = 2637 (bucket 2637 is not below it); 0.26371 keeps it.
	if mustNew(t, shape.Config{Sample: map[string]float64{"API": 0.2637}}).For("API").Keep("42") ||
		!mustNew(t, shape.Config{Sample: map[string]float64{"API": 0.26371}}).For("API").Keep("42") {
		t.Fatal("the threshold is not fraction × 10000")
	}
	// Two Shapers (a restart, another replica) keep the same rows, about a
	// quarter of them.
	one := mustNew(t, shape.Config{Sample: map[string]float64{"API": 0.25}}).For("API")
	two := mustNew(t, shape.Config{Sample: map[string]float64{"*": 0.25}}).For("API")
	const n = 100_000
	kept := 0
	for i := range n {
		key := fmt.Sprintf("4-%08d-REQ", i)
		k := one.Keep(key)
		if k != two.Keep(key) {
			t.Fatalf("%s: kept by one Shaper, not by the other", key)
		}
		if k {
			kept++
		}
	}
	if f := float64(kept) / n; math.Abs(f-0.25) > 0.01 {
		t.Fatalf("kept %.4f of %d keys, want 0.25 ± 0.01", f, n)
	}
}

func TestNilShaperAndNoopPlanCostNothing(t *testing.T) {
	var s *shape.Shaper
	p := s.For("API")
	row := map[string]string{"USER_ID": "x"}
	rec := map[string]any{"UserId": "x"}
	if p != nil || !p.Noop() || p.Sampling() || !p.Keep("k") || !p.Strings(row) || !p.Values(rec) || s.Source() != "" {
		t.Fatal("a nil Shaper or Plan did something")
	}
	empty := mustNew(t, shape.Config{Sample: map[string]float64{"Other": 0.5}}).For("API")
	if !empty.Noop() {
		t.Fatal("a plan with no rule and fraction 1 is not a no-op")
	}
	if n := testing.AllocsPerRun(100, func() {
		if !empty.Keep("some-request-id") || !empty.Strings(row) || !empty.Values(rec) {
			t.Fatal("dropped")
		}
	}); n != 0 {
		t.Fatalf("a no-op plan allocates %.0f times per row", n)
	}
	if row["USER_ID"] != "x" || rec["UserId"] != "x" {
		t.Fatal("a no-op plan changed the row")
	}
}

func TestInvalidConfigurationsNameTheRuleAndTheFix(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  shape.Config
		key  string // the RuleError's key, or "sample"
		want string
	}{
		{"no action", shape.Config{Rules: []shape.Rule{{Fields: []string{"A"}}}}, "action", "transforms[0] (transform#1): action: required"},
		{"unknown action", shape.Config{Rules: []shape.Rule{{Action: "encrypt", Fields: []string{"A"}}}}, "action", `"encrypt" is not one of hash, mask`},
		{"drop_row without match", shape.Config{Rules: []shape.Rule{{Action: shape.DropRow, Name: "noisy"}}}, "match", "transforms[0] (noisy): match: required by drop_row"},
		{"drop_row with fields", shape.Config{Rules: []shape.Rule{{Action: shape.DropRow, Fields: []string{"A"}, Match: map[string]string{"A": "1"}}}}, "fields", "drop_row does not read fields"},
		{"hash without fields", shape.Config{Rules: []shape.Rule{{Action: shape.Mask}, {Action: shape.Hash}}}, "fields", "transforms[1] (hash#2): fields: required by hash"},
		{"drop_field without fields", shape.Config{Rules: []shape.Rule{{Action: shape.DropField}}}, "fields", "required by drop_field"},
		{"regex_replace without fields", shape.Config{Rules: []shape.Rule{{Action: shape.RegexReplace, Pattern: "a"}}}, "fields", "required by regex_replace"},
		{"regex_replace without pattern", shape.Config{Rules: []shape.Rule{{Action: shape.RegexReplace, Fields: []string{"A"}}}}, "pattern", "required by regex_replace"},
		{"bad RE2", shape.Config{Rules: []shape.Rule{{Action: shape.RegexReplace, Fields: []string{"A"}, Pattern: `x(?=y)`}}}, "pattern", `"error parsing regexp: invalid or unsupported Perl syntax: `},
		{"pattern on hash", shape.Config{Rules: []shape.Rule{{Action: shape.Hash, Fields: []string{"A"}, Pattern: "x"}}}, "pattern", "only regex_replace reads pattern"},
		{"replacement on mask", shape.Config{Rules: []shape.Rule{{Action: shape.Mask, Fields: []string{"A"}, Replacement: "x"}}}, "replacement", "only regex_replace reads replacement"},
		{"match on hash", shape.Config{Rules: []shape.Rule{{Action: shape.Hash, Fields: []string{"A"}, Match: map[string]string{"A": "x"}}}}, "match", "only drop_row reads match"},
		{"empty field", shape.Config{Rules: []shape.Rule{{Action: shape.Hash, Fields: []string{""}}}}, "fields", "an empty field name"},
		{"empty event type glob", shape.Config{Rules: []shape.Rule{{Action: shape.Hash, Fields: []string{"A"}, EventTypes: []string{""}}}}, "event_types", "an empty glob"},
		{"same name", shape.Config{Rules: []shape.Rule{{Action: shape.Hash, Fields: []string{"A"}, Name: "x"}, {Action: shape.Mask, Fields: []string{"A"}, Name: "x"}}}, "name", "transforms[0] has the same name"},
		{"fraction above 1", shape.Config{Sample: map[string]float64{"API": 1.5}}, "sample", `sample "API": 1.5 is not a fraction`},
		{"negative fraction", shape.Config{Sample: map[string]float64{"API": -0.1}}, "sample", "is not a fraction"},
		{"NaN", shape.Config{Sample: map[string]float64{"API": math.NaN()}}, "sample", "NaN is not a fraction"},
		{"empty sample glob", shape.Config{Sample: map[string]float64{"": 0.5}}, "sample", "an empty glob"},
		{"case twins", shape.Config{Sample: map[string]float64{"API": 0.5, "api": 0.1}}, "sample", "without regard to case"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := shape.New("eventlogfile", tc.cfg)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "eventlogfile: ") {
				t.Fatalf("error %q, want it to say %q", err, tc.want)
			}
			var re *shape.RuleError
			var se *shape.SampleError
			switch {
			case tc.key == "sample":
				if !errors.As(err, &se) || !errors.Is(err, shape.ErrInvalidSample) {
					t.Fatalf("%v is not a SampleError wrapping ErrInvalidSample", err)
				}
			case !errors.As(err, &re) || re.Key != tc.key || !errors.Is(err, shape.ErrInvalidRule):
				t.Fatalf("%v: want a RuleError on %s wrapping ErrInvalidRule", err, tc.key)
			}
		})
	}
	var re *shape.RuleError
	_, err := shape.New("x", shape.Config{Rules: []shape.Rule{{Action: shape.RegexReplace, Fields: []string{"A"}, Pattern: "("}}})
	if !errors.As(err, &re) || re.Err == nil || !strings.Contains(err.Error(), "missing closing )") {
		t.Fatalf("the RE2 error is not kept: %v", err)
	}
	// Every problem at once.
	if errs := shape.Validate(shape.Config{Rules: []shape.Rule{{Action: "x"}, {Action: shape.Hash}},
		Sample: map[string]float64{"A": 2}}); len(errs) != 3 {
		t.Fatalf("%d problems: %v", len(errs), errs)
	}
}

func TestConcurrentPlans(t *testing.T) {
	s := mustNew(t, shape.Config{Salt: "pepper", Sample: map[string]float64{"*": 0.5}, Rules: []shape.Rule{
		{Action: shape.Hash, Fields: []string{"*_ID"}}, {Action: shape.Mask, Fields: []string{"*_IP"}},
	}})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				p := s.For(fmt.Sprint("T", i%7))
				row := map[string]string{"USER_ID": "005000000000001", fmt.Sprintf("C%d_IP", i%50): "10.0.0.1", "N": fmt.Sprint(g)}
				if p.Keep(fmt.Sprint(i)) {
					p.Strings(row)
					if row["USER_ID"] != pepperUser {
						t.Error("wrong hash under concurrency")
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// A dotted field name is a path into a decoded record's nested records:
// the only way to name a Pub/Sub event's ChangeEventHeader fields.
func TestDottedFieldsReachNestedRecords(t *testing.T) {
	s := mustNew(t, shape.Config{Rules: []shape.Rule{
		{Action: shape.Hash, Fields: []string{"ChangeEventHeader.commitUser"}},
		{Action: shape.DropField, Fields: []string{"ChangeEventHeader.nulledFields", "Missing.x", "Name.x"}},
		{Action: shape.Mask, Fields: []string{"A.B.*Ip"}},
		{Action: shape.DropRow, Match: map[string]string{"ChangeEventHeader.changeType": "DELETE"}},
	}})
	rec := map[string]any{
		"Name":              "Acme",
		"ChangeEventHeader": map[string]any{"commitUser": "005000000000001", "nulledFields": []any{"Phone"}, "changeType": "UPDATE"},
		"A":                 map[string]any{"B": map[string]any{"SourceIp": "10.1.2.3", "Other": "x"}},
	}
	if !s.For("/data/AccountChangeEvent").Values(rec) {
		t.Fatal("an UPDATE was dropped")
	}
	h := rec["ChangeEventHeader"].(map[string]any)
	if u, _ := h["commitUser"].(string); len(u) != shape.HashLen || u == "005000000000001" {
		t.Errorf("ChangeEventHeader.commitUser = %v, want its hash", h["commitUser"])
	}
	if _, ok := h["nulledFields"]; ok || rec["Name"] != "Acme" {
		t.Errorf("drop_field: %v", rec)
	}
	if b := rec["A"].(map[string]any)["B"].(map[string]any); b["SourceIp"] != "10.1.2.x" || b["Other"] != "x" {
		t.Errorf("mask of A.B.*Ip: %v", b)
	}
	del := map[string]any{"ChangeEventHeader": map[string]any{"changeType": "DELETE"}}
	if s.For("/data/AccountChangeEvent").Values(del) {
		t.Error("match on ChangeEventHeader.changeType did not drop a DELETE")
	}
	// A flat row takes the dotted name as it is.
	row := map[string]string{"ChangeEventHeader.commitUser": "005000000000001"}
	s.For("x").Strings(row)
	if row["ChangeEventHeader.commitUser"] == "005000000000001" {
		t.Errorf("flat row: %v", row)
	}
	for _, cfg := range []shape.Config{
		{Rules: []shape.Rule{{Action: shape.Hash, Fields: []string{"*.commitUser"}}}},
		{Rules: []shape.Rule{{Action: shape.Hash, Fields: []string{"ChangeEventHeader."}}}},
		{Rules: []shape.Rule{{Action: shape.DropRow, Match: map[string]string{"H.change*": "x"}}}},
	} {
		if errs := shape.Validate(cfg); len(errs) != 1 {
			t.Errorf("%+v: %v", cfg.Rules, errs)
		}
	}
}

// The record-id rule docs/governance.md gives replaces adjacent ids too.
func TestTheDocumentedRecordIDRuleReplacesAdjacentIDs(t *testing.T) {
	s := mustNew(t, shape.Config{Rules: []shape.Rule{{Action: shape.RegexReplace, Fields: []string{"URI"},
		Pattern: `/[a-zA-Z0-9]{15}(?:[a-zA-Z0-9]{3})?\b`, Replacement: `/:id`}}})
	for in, want := range map[string]string{
		"/services/data/v60.0/ui-api/records/001xx000003DGb2AAG/005xx000001Sv6eAAC": "/services/data/v60.0/ui-api/records/:id/:id",
		"/001xx000003DGb2/related?x=1":                                              "/:id/related?x=1",
		"/apex/MyVisualforcePageName1234567":                                        "/apex/MyVisualforcePageName1234567", // 28 characters: no id
	} {
		row := map[string]string{"URI": in}
		s.For("URI").Strings(row)
		if row["URI"] != want {
			t.Errorf("%s: %q, want %q", in, row["URI"], want)
		}
	}
}

// A replacement is Go's regexp.Expand syntax, taken as written: $1, ${1},
// $name and ${name} are the pattern's groups ($0 the whole match), $$ a
// literal $ (so $${name} is the text ${name}). A reference to a group the
// pattern lacks, which Expand would replace with nothing, is refused with
// the groups it has, and, for $1x or $name_x, the braces that were meant.
func TestReplacementReferencesNameGroups(t *testing.T) {
	const pattern = `^(?P<local>[^@]+)@(\w+)\.(?P<tld>\w+)$`
	for repl, want := range map[string]string{
		"${local}@redacted":   "alice@redacted",
		"$local@redacted":     "alice@redacted",
		"${1}@$2.${3}":        "alice@example.com",
		"$1 at $tld":          "alice at com",
		"[$0]":                "[alice@example.com]",
		"$$${local} costs $$": "$alice costs $",
		"$${local}":           "${local}",
		"${2}x":               "examplex",
		"$ 5 and ${":          "$ 5 and ${",
	} {
		s := mustNew(t, shape.Config{Rules: []shape.Rule{{Action: shape.RegexReplace, Fields: []string{"Username"}, Pattern: pattern, Replacement: repl}}})
		row := map[string]string{"Username": "alice@example.com"}
		s.For("LoginEvent").Strings(row)
		if row["Username"] != want {
			t.Errorf("replacement %q: %q, want %q", repl, row["Username"], want)
		}
	}
	for repl, wants := range map[string][]string{
		"@${REDACT_DOMAIN}": {"${REDACT_DOMAIN} names no group of pattern (its groups are $0 (the whole match) to $3, by name ${local}, ${tld})",
			"never from the environment", "write $$ for a literal $"},
		"$4":          {"$4 names no group of pattern"},
		"$1x":         {"$1x names no group", `for the group 1 followed by "x", write ${1}x`},
		"$local_part": {"$local_part names no group", `for the group local followed by "_part", write ${local}_part`},
		"$5.00":       {"$5 names no group"},
		"${01}":       {"${01} names no group"},
	} {
		errs := shape.Validate(shape.Config{Rules: []shape.Rule{{Action: shape.RegexReplace, Fields: []string{"A"}, Pattern: pattern, Replacement: repl}}})
		var re *shape.RuleError
		if len(errs) != 1 || !errors.As(errs[0], &re) || re.Key != "replacement" {
			t.Errorf("replacement %q: %v, want one problem on replacement", repl, errs)
			continue
		}
		for _, want := range wants {
			if !strings.Contains(re.Reason, want) {
				t.Errorf("replacement %q: %q does not say %q", repl, re.Reason, want)
			}
		}
	}
	errs := shape.Validate(shape.Config{Rules: []shape.Rule{{Action: shape.RegexReplace, Fields: []string{"A"}, Pattern: "@.*$", Replacement: "${local}"}}})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "it has no group: only $0, the whole match") {
		t.Errorf("a pattern without groups: %v", errs)
	}
}

// A pattern is taken as written. ${NAME} with its $ unescaped is an
// end-of-text anchor before a literal {NAME}: it matches nothing, and was
// surely meant as an environment variable or as the text; it is refused
// with the escape that matches the text. $ anchors, {n} repetitions and
// an escaped \${NAME} are left alone.
func TestPatternPlaceholderIsRefused(t *testing.T) {
	for pattern, want := range map[string]string{
		`^\d{3}-\d{2,4}$`:     "123-4567",
		`(ab){2}$|^$`:         "abab",
		`\${token}`:           "${token}",
		`[$]\{token\}`:        "${token}",
		`\\\${token}`:         `\${token}`,
		`(?P<x>t.ken)\$\{x\}`: "token${x}",
	} {
		s := mustNew(t, shape.Config{Rules: []shape.Rule{{Action: shape.RegexReplace, Fields: []string{"A"}, Pattern: pattern, Replacement: "<$0>"}}})
		row := map[string]string{"A": want}
		s.For("X").Strings(row)
		if row["A"] != "<"+want+">" {
			t.Errorf("pattern %q on %q: %q", pattern, want, row["A"])
		}
	}
	for _, pattern := range []string{`${SECRET}`, `key=${SECRET}`, `\\${SECRET}`, `$${SECRET}`, `\Q${SECRET}\E`, `(?m)^a|${SECRET}`} {
		errs := shape.Validate(shape.Config{Rules: []shape.Rule{{Action: shape.RegexReplace, Fields: []string{"A"}, Pattern: pattern}}})
		var re *shape.RuleError
		if len(errs) != 1 || !errors.As(errs[0], &re) || re.Key != "pattern" ||
			!strings.Contains(re.Reason, "${SECRET} matches nothing: its $ is the end-of-text anchor; a pattern is read as written, never from the environment: write \\${SECRET} to match the text ${SECRET}") {
			t.Errorf("pattern %q: %v", pattern, errs)
		}
	}
}

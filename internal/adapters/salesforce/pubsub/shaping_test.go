package pubsub_test

import (
	"cmp"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub/eventbus"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
)

// logicalTopic carries the same change events as the account topic, with a
// schema that declares its datetimes with the timestamp-millis logical type.
const logicalTopic = "/data/AccountLogicalChangeEvent"

// accountChanges are an UNDELETE whose body carries a CreatedDate 97 days
// before the commit, a CREATE whose CreatedDate is in whole seconds, and an
// UPDATE whose CreatedDate is null; each committed at a time with
// milliseconds.
func accountChanges() (records []map[string]any, commits []time.Time) {
	commits = []time.Time{t0.Add(time.Hour + 123*time.Millisecond), t0.Add(2*time.Hour + 456*time.Millisecond), t0.Add(3*time.Hour + 789*time.Millisecond)}
	records = []map[string]any{
		fakepubsub.AccountUndelete(1, commits[0], commits[0].AddDate(0, 0, -97)),
		fakepubsub.AccountCreate(2, commits[1]),
		fakepubsub.AccountChange(3, commits[2]),
	}
	return records, commits
}

// A change event is timed by its commit (ChangeEventHeader.commitTimestamp),
// never by the CreatedDate in its body: an UNDELETE carries the record's
// original CreatedDate (months old, which Loki refuses as too old), a
// CREATE's is in whole seconds.
func TestChangeEventsAreTimedByTheirCommit(t *testing.T) {
	e := newEnv(t, pubsub.Spec{Topics: []string{fakepubsub.AccountTopic}, ReplayPreset: pubsub.Earliest}, nil)
	records, commits := accountChanges()
	e.srv.Append(fakepubsub.AccountTopic, records...)
	got := e.run(t, nil, &sink{}, hasN(3))
	for i, en := range got {
		if !en.Time.Equal(commits[i]) {
			t.Errorf("%s event at %s, want its commitTimestamp %s", events(got)[i]["ChangeEventHeader"].(map[string]any)["changeType"], en.Time, commits[i])
		}
	}
}

// Every datetime reaches the line as the epoch milliseconds Salesforce
// sends, whether the schema spells it as a plain long or as a long with the
// timestamp-millis logical type (in a nullable union or not): the same
// event gives the same line and time either way.
func TestDatetimesAreEpochMillisecondsWhateverTheSchemaSpelling(t *testing.T) {
	e := newEnv(t, pubsub.Spec{Topics: []string{fakepubsub.AccountTopic, logicalTopic}, ReplayPreset: pubsub.Earliest}, func(s *fakepubsub.Server) {
		s.AddTopic(logicalTopic, fakepubsub.AccountChangeEventLogicalSchema)
	})
	records, commits := accountChanges()
	e.srv.Append(fakepubsub.AccountTopic, records...)
	e.srv.Append(logicalTopic, records...)
	got := e.run(t, nil, &sink{}, hasN(6))
	byTopic := map[string][]ports.Entry{}
	for _, en := range got {
		byTopic[en.Labels["event_type"]] = append(byTopic[en.Labels["event_type"]], en)
	}
	plain, logical := byTopic["AccountChangeEvent"], byTopic["AccountLogicalChangeEvent"]
	if len(plain) != 3 || len(logical) != 3 {
		t.Fatalf("%d and %d entries", len(plain), len(logical))
	}
	for i := range plain {
		if plain[i].Line != logical[i].Line || !plain[i].Time.Equal(logical[i].Time) {
			t.Errorf("the same event reads differently by schema spelling:\n plain   %s %s\n logical %s %s", plain[i].Time, plain[i].Line, logical[i].Time, logical[i].Line)
		}
	}
	want := `"commitTimestamp":` + strconv.FormatInt(commits[0].UnixMilli(), 10)
	created := `"CreatedDate":` + strconv.FormatInt(commits[0].AddDate(0, 0, -97).Truncate(time.Second).UnixMilli(), 10)
	if !strings.Contains(logical[0].Line, want) || !strings.Contains(logical[0].Line, created) {
		t.Errorf("datetimes are not epoch milliseconds (want %s and %s): %s", want, created, logical[0].Line)
	}
}

// Only Salesforce's replay id codes (replayid.corrupted, and
// replayid.validation.failed) restart a topic from EARLIEST. An
// INVALID_ARGUMENT without an error-code trailer (a proxy dropped it) or
// with another code keeps the stored position and retries with backoff,
// logged as an ERROR: EARLIEST would replay up to 72 hours of events.
func TestOnlyReplayIDErrorCodesRestartFromEarliest(t *testing.T) {
	for _, tc := range []struct {
		code     string
		fallback bool
	}{
		{"", false},
		{"sfdc.platform.eventbus.grpc.subscription.fetch.topic.mismatch", false},
		{fakepubsub.CodeReplayValidation, true},
		{fakepubsub.CodeReplayCorrupted, true},
	} {
		t.Run(cmp.Or(tc.code, "no trailer"), func(t *testing.T) {
			logs := &testenv.Buffer{}
			e := newEnvLog(t, pubsub.Spec{}, func(s *fakepubsub.Server) { s.InvalidArgument = []string{tc.code} }, slog.New(slog.NewTextHandler(logs, nil)))
			e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 6)...)
			got := e.run(t, map[string]string{"pubsub:/event/LoginEventStream": e.b64(fakepubsub.LoginTopic, 2)}, &sink{}, func(es []ports.Entry) bool {
				return len(events(es)) >= 4 && (!tc.fallback || len(events(es)) >= 6)
			})
			subs := e.srv.Subscriptions()
			if len(subs) < 2 || subs[0].Position != 2 {
				t.Fatalf("subscriptions %+v", subs)
			}
			if tc.fallback {
				if subs[1].Preset != eventbus.ReplayPreset_EARLIEST || e.count("fallback") != 1 {
					t.Fatalf("second subscription %+v, %d fallbacks: want EARLIEST after one fallback", subs[1], e.count("fallback"))
				}
				return
			}
			if subs[1].Preset != eventbus.ReplayPreset_CUSTOM || subs[1].Position != 2 || e.count("fallback") != 0 || e.count("reconnect:invalid_argument") != 1 {
				t.Fatalf("second subscription %+v, %d fallbacks: want the stored position kept, no fallback", subs[1], e.count("fallback"))
			}
			if ids := identifiers(got); len(ids) != 4 || ids[0] != "login-2" {
				t.Fatalf("events %v, want login-2…5 (after the stored replay id)", ids)
			}
			if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "keeping the position") {
				t.Fatalf("no ERROR saying the position is kept:\n%s", out)
			}
		})
	}
}

// orderEventSchema is a platform event whose datetimes are all nullable:
// its CreatedDate and a custom datetime Salesforce names by its doc.
const orderEventSchema = `{"type":"record","name":"Order_Event__e","namespace":"com.sforce.eventbus","fields":[
 {"name":"CreatedDate","type":["null","long"],"doc":"CreatedDate:DateTime","default":null},
 {"name":"Occurred__c","type":["null","long"],"doc":"Occurred__c:DateTime","default":null},
 {"name":"Message__c","type":["null","string"],"default":null}
]}`

const orderTopic = "/event/Order_Event__e"

// Duplicates collapse in Loki only when every copy is byte-identical: a
// standby that takes over from the committed replay id emits the events
// after it again, and each must equal the old leader's copy (labels,
// timestamp to the nanosecond, line, metadata), whatever time it is read
// at, including events whose time field is null.
func TestReplayedEntriesAreIdentical(t *testing.T) {
	e := newEnv(t, pubsub.Spec{Topics: []string{fakepubsub.LoginTopic, fakepubsub.AccountTopic, orderTopic}}, func(s *fakepubsub.Server) {
		s.AddTopic(orderTopic, orderEventSchema)
	})
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 30)...)
	records, _ := accountChanges()
	e.srv.Append(fakepubsub.AccountTopic, records...)
	at := t0.Add(5 * time.Hour).UnixMilli()
	e.srv.Append(orderTopic,
		map[string]any{"CreatedDate": at, "Occurred__c": nil, "Message__c": "first"},
		map[string]any{"CreatedDate": nil, "Occurred__c": at + 1500, "Message__c": "custom datetime only"},
		map[string]any{"CreatedDate": nil, "Occurred__c": nil, "Message__c": "no time"},
		map[string]any{"CreatedDate": at + 3000, "Occurred__c": nil, "Message__c": "after"},
	)
	// The committed positions the standby resumes from.
	resume := map[string]string{
		"pubsub:" + fakepubsub.LoginTopic:   e.b64(fakepubsub.LoginTopic, 10),
		"pubsub:" + fakepubsub.AccountTopic: e.b64(fakepubsub.AccountTopic, 0),
		"pubsub:" + orderTopic:              e.b64(orderTopic, 0),
	}
	leader := e.run(t, resume, &sink{}, hasN(27))
	time.Sleep(20 * time.Millisecond) // the standby reads them later
	standby := e.run(t, resume, &sink{}, hasN(27))
	key := func(en ports.Entry) string { return en.Checkpoint.Key + " " + en.Checkpoint.Value }
	first := map[string]ports.Entry{}
	for _, en := range leader {
		if !en.CheckpointOnly {
			first[key(en)] = en
		}
	}
	n := 0
	for _, en := range standby {
		if en.CheckpointOnly {
			continue
		}
		n++
		was, ok := first[key(en)]
		if !ok {
			t.Errorf("the standby emitted an event the leader did not: %s", en.Line)
			continue
		}
		if was.Time.UnixNano() != en.Time.UnixNano() || was.Line != en.Line || !reflect.DeepEqual(was.Labels, en.Labels) || !reflect.DeepEqual(was.Metadata, en.Metadata) {
			t.Errorf("replayed copy differs:\n first  %s %v %v %s\n replay %s %v %v %s", was.Time, was.Labels, was.Metadata, was.Line, en.Time, en.Labels, en.Metadata, en.Line)
		}
	}
	if n != 27 {
		t.Fatalf("%d events replayed, want 27", n)
	}
	// The times chosen for the order events: CreatedDate; the datetime the
	// schema declares; the previous event's; CreatedDate.
	var orders []ports.Entry
	for _, en := range standby {
		if en.Labels["event_type"] == "Order_Event__e" {
			orders = append(orders, en)
		}
	}
	want := []int64{at, at + 1500, at + 1500, at + 3000}
	for i, en := range orders {
		if en.Time.UnixMilli() != want[i] {
			t.Errorf("order event %d at %d, want %d: %s", i, en.Time.UnixMilli(), want[i], en.Line)
		}
	}
}

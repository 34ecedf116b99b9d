package pubsub

import (
	"errors"
	"slices"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
)

func accountNames(t testing.TB) *fieldNames {
	t.Helper()
	s, err := parseSchema([]byte(fakepubsub.AccountChangeEventSchema))
	if err != nil {
		t.Fatal(err)
	}
	if s.names == nil {
		t.Fatal("no field names for a change event schema")
	}
	return s.names
}

// The bitmap rule of Salesforce's "Event Deserialization Considerations":
// bit i of the first element names top-level field i; "<p>-<bitmap>"
// names the nested fields of the compound field at position p. The
// Account schema's positions: 0 ChangeEventHeader, 1 Name, 2
// BillingAddress (Street, City, State, PostalCode, Country), 3
// CreatedDate, 4 LastModifiedDate, 5 Rating, 6 Industry.
func TestFieldBitmapsDecode(t *testing.T) {
	f := accountNames(t)
	for _, c := range []struct {
		items []string
		want  []string
		bad   bool
	}{
		{nil, []string{}, false},
		{[]string{"0x2"}, []string{"Name"}, false},
		{[]string{"0x62"}, []string{"Name", "Rating", "Industry"}, false},
		{[]string{"0x0062"}, []string{"Name", "Rating", "Industry"}, false}, // leading zeros
		{[]string{"0x7a"}, []string{"Name", "CreatedDate", "LastModifiedDate", "Rating", "Industry"}, false},
		{[]string{"0x22", "2-0x12"}, []string{"Name", "Rating", "BillingAddress.City", "BillingAddress.Country"}, false},
		{[]string{"2-0x2"}, []string{"BillingAddress.City"}, false}, // only a compound field
		{[]string{"0x100"}, nil, true},                              // bit 8: the schema has 7 fields
		{[]string{"0xZ"}, nil, true},                                // not hexadecimal
		{[]string{"0x"}, []string{}, false},                         // no digits: no field, as Salesforce decodes it
		{[]string{"Name"}, nil, true},                               // a name, not a bitmap
		{[]string{"0x2", "1-0x1"}, nil, true},                       // Name is not a compound field
		{[]string{"0x2", "9-0x1"}, nil, true},                       // no position 9
		{[]string{"0x2", "2-0x40"}, nil, true},                      // BillingAddress has 5 fields
		{[]string{"0x2", "2-1"}, nil, true},                         // nested bitmap without 0x
		{[]string{"0x2", "0x4"}, nil, true},                         // a second top-level bitmap
	} {
		got, err := f.decode(c.items)
		switch {
		case c.bad && !errors.Is(err, errBitmap):
			t.Errorf("%q: %v, %v; want errBitmap", c.items, got, err)
		case !c.bad && (err != nil || !slices.Equal(got, c.want)):
			t.Errorf("%q: %v, %v; want %v", c.items, got, err, c.want)
		}
	}
}

// FuzzFieldBitmaps decodes what an independent encoder of the rule
// (fakepubsub.Bitmaps, written with math/big) makes of any set of the
// Account schema's fields, and must get the set back in schema order; any
// list of strings decodes or fails with errBitmap, never panics.
func FuzzFieldBitmaps(f *testing.F) {
	f.Add(uint64(0x62), uint8(0x12), "0x2", "2-0x2")
	f.Add(uint64(0), uint8(1), "0x", "-")
	f.Add(uint64(1<<63), uint8(0xff), "0xFFFFFFFFFFFFFFFFFFFFFFFFF", "2-0x")
	top := []string{"ChangeEventHeader", "Name", "BillingAddress", "CreatedDate", "LastModifiedDate", "Rating", "Industry"}
	addr := []string{"Street", "City", "State", "PostalCode", "Country"}
	names := accountNames(f)
	f.Fuzz(func(t *testing.T, topBits uint64, addrBits uint8, a, b string) {
		var want []string
		for i, n := range top {
			if n != "BillingAddress" && n != "ChangeEventHeader" && topBits&(1<<i) != 0 {
				want = append(want, n)
			}
		}
		for i, n := range addr {
			if addrBits&(1<<i) != 0 {
				want = append(want, "BillingAddress."+n)
			}
		}
		var items []string
		for _, v := range fakepubsub.Bitmaps(fakepubsub.AccountChangeEventSchema, want...) {
			items = append(items, v.(string))
		}
		got, err := names.decode(items)
		if err != nil || len(got) != len(want) || len(want) > 0 && !slices.Equal(got, want) {
			t.Fatalf("%v encoded %q decoded %v, %v", want, items, got, err)
		}
		if _, err := names.decode([]string{a, b}); err != nil && !errors.Is(err, errBitmap) {
			t.Fatalf("%q %q: %v is not errBitmap", a, b, err)
		}
	})
}

// contactChangeSchema has a person name (Salesforce's Switchable_PersonName:
// a union of null, a string and a record) and a header whose
// changedFields is a nullable array.
const contactChangeSchema = `{"type":"record","name":"ContactChangeEvent","namespace":"com.sforce.eventbus","fields":[
 {"name":"ChangeEventHeader","type":{"type":"record","name":"ChangeEventHeader","fields":[
   {"name":"changeType","type":"string"},
   {"name":"commitTimestamp","type":"long"},
   {"name":"nulledFields","type":{"type":"array","items":"string"}},
   {"name":"diffFields","type":{"type":"array","items":"string"}},
   {"name":"changedFields","type":["null",{"type":"array","items":"string"}]}]}},
 {"name":"Name","type":["null","string",{"type":"record","name":"Switchable_PersonName","fields":[
   {"name":"Salutation","type":["null","string"],"default":null},
   {"name":"FirstName","type":["null","string"],"default":null},
   {"name":"LastName","type":["null","string"],"default":null}]}],"default":null},
 {"name":"Email","type":["null","string"],"default":null}
]}`

// A person name's nested bitmap names the record's fields; a list whose
// schema is not a plain array of strings is left as it came, by both
// paths alike.
func TestPersonNamesAndNullableListsDecodeAlikeOnBothPaths(t *testing.T) {
	s := mustSchema(t, contactChangeSchema)
	rec := map[string]any{
		"ChangeEventHeader": map[string]any{"changeType": "UPDATE", "commitTimestamp": int64(1),
			"nulledFields": []any{"1-0x1"}, "diffFields": []any{},
			"changedFields": map[string]any{"array": []any{"0x4", "1-0x6"}}},
		"Name":  map[string]any{"com.sforce.eventbus.Switchable_PersonName": map[string]any{"Salutation": nil, "FirstName": map[string]any{"string": "Ada"}, "LastName": map[string]any{"string": "Lovelace"}}},
		"Email": map[string]any{"string": "ada@example.com"},
	}
	payload, err := avro.Marshal(s.avro, rec)
	if err != nil {
		t.Fatal(err)
	}
	sameAsGeneric(t, s, payload)
	got, _, err := s.decodeRecord(payload)
	if err != nil {
		t.Fatal(err)
	}
	h := got["ChangeEventHeader"].(map[string]any)
	if n := h["nulledFields"].([]any); len(n) != 1 || n[0] != "Name.Salutation" {
		t.Errorf("nulledFields %v, want [Name.Salutation]", n)
	}
	if c := h["changedFields"].([]any); len(c) != 2 || c[0] != "0x4" {
		t.Errorf("changedFields (a nullable array) %v, want it as it came", c)
	}
	for _, p := range validPayloads(t, contactChangeSchema, 500, 3) {
		sameAsGeneric(t, s, p)
	}
}

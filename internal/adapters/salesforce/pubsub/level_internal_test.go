package pubsub

import (
	"fmt"
	"testing"

	"github.com/hamba/avro/v2"
)

// levelSchema has the fields salesforce.Level reads, of the types they
// come in.
const levelSchema = `{"type":"record","name":"L","namespace":"test","fields":[
 {"name":"EXCEPTION_TYPE","type":["null","string"]},
 {"name":"STATUS_CODE","type":["null","string","int"]},
 {"name":"REQUEST_STATUS","type":["null",{"type":"enum","name":"RS","symbols":["S","F","A","N","s"]}]},
 {"name":"LOGIN_STATUS","type":["null","string"]},
 {"name":"OPERATION_STATUS","type":["null","string","boolean"]},
 {"name":"Status","type":["null","string"]},
 {"name":"LoginType","type":["null","string","long"]},
 {"name":"LoginKey","type":["null","bytes","double"]}
]}`

// TestLevelMemoIsLevel: one memo answers as salesforce.Level does on the
// generic path, event after event, values the paths share or not, until
// and after it is full.
func TestLevelMemoIsLevel(t *testing.T) {
	s := mustSchema(t, levelSchema)
	values := map[string][]any{
		"EXCEPTION_TYPE":   {nil, map[string]any{"string": ""}, map[string]any{"string": " "}, map[string]any{"string": "null"}, map[string]any{"string": "x"}},
		"STATUS_CODE":      {nil, map[string]any{"string": " 500 "}, map[string]any{"string": "404"}, map[string]any{"int": 503}, map[string]any{"int": 200}, map[string]any{"string": "x"}},
		"REQUEST_STATUS":   {nil, map[string]any{"test.RS": "S"}, map[string]any{"test.RS": "F"}, map[string]any{"test.RS": "A"}, map[string]any{"test.RS": "s"}},
		"LOGIN_STATUS":     {nil, map[string]any{"string": "LOGIN_NO_ERROR"}, map[string]any{"string": "LOGIN_ERROR_X"}},
		"OPERATION_STATUS": {nil, map[string]any{"string": "Success"}, map[string]any{"string": "Failed"}, map[string]any{"boolean": true}},
		"Status":           {nil, map[string]any{"string": "Success"}, map[string]any{"string": "Invalid Password"}, map[string]any{"string": "null"}},
		"LoginType":        {nil, map[string]any{"string": "Application"}, map[string]any{"long": int64(3)}},
		"LoginKey":         {nil, map[string]any{"bytes": []byte{1}}, map[string]any{"double": 1.5}},
	}
	names := []string{"EXCEPTION_TYPE", "STATUS_CODE", "REQUEST_STATUS", "LOGIN_STATUS", "OPERATION_STATUS", "Status", "LoginType", "LoginKey"}
	var m levelMemo
	check := func(rec map[string]any) {
		t.Helper()
		p, err := avro.Marshal(s.avro, rec)
		if err != nil {
			t.Fatal(err)
		}
		line, probe, err := s.fast.decode(new(writer), p)
		if err != nil {
			t.Fatal(err)
		}
		gen, err := s.decodeGeneric(p)
		if err != nil {
			t.Fatal(err)
		}
		want := (&decoded{rec: gen}).level()
		for range 2 { // remembered, then from memory
			if got := m.level(&probe); got != want {
				t.Fatalf("memo %s, Level %s: %s", got, want, line)
			}
		}
		if m.steps > maxLevelSteps {
			t.Fatalf("%d steps", m.steps)
		}
	}
	// Every combination of the first values, then of the rest.
	var walk func(i int, rec map[string]any)
	walk = func(i int, rec map[string]any) {
		if i == len(names) {
			check(rec)
			return
		}
		for _, v := range values[names[i]] {
			rec[names[i]] = v
			walk(i+1, rec)
		}
	}
	walk(0, map[string]any{})
	// Then past the bound: exception types never seen, and the paths
	// remembered before still answered.
	for i := range 2 * maxLevelSteps {
		rec := map[string]any{}
		for _, n := range names {
			rec[n] = values[n][i%len(values[n])]
		}
		rec["EXCEPTION_TYPE"] = map[string]any{"string": fmt.Sprint("E", i)}
		check(rec)
	}
	if m.steps < maxLevelSteps-len(names)-1 {
		t.Fatalf("the memo holds %d steps; the test meant to fill it", m.steps)
	}
}

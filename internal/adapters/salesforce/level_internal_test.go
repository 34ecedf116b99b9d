package salesforce

import (
	"strings"
	"testing"
)

// lowerIs answers as strings.ToLower(v) == w does, and Level allocates
// nothing for a row without a status code whose status reads Success.
func TestLevelCommonAnswersAllocateNothing(t *testing.T) {
	for _, v := range []string{"success", "Success", "SUCCESS", "ſuccess", "succeeded", "SucceedeD", "null", "NULL", "nul", "nulls", "Fail", "\xffuccess", ""} {
		for _, w := range []string{"success", "succeeded", "null"} {
			if got, want := lowerIs(v, w), strings.ToLower(v) == w; got != want {
				t.Errorf("lowerIs(%q, %q) = %v, strings.ToLower says %v", v, w, got, want)
			}
		}
	}
	row := map[string]string{"EVENT_TYPE": "Login", "Status": "Success", "REQUEST_STATUS": "S"}
	get := func(k string) string { return row[k] }
	if n := testing.AllocsPerRun(100, func() { _ = Level(get) }); n != 0 {
		t.Errorf("Level allocates %v times on a common row", n)
	}
}

package sfrules_test

import (
	"testing"

	"github.com/sf2loki/sf2loki/internal/sfrules"
)

func TestBigObjectDetection(t *testing.T) {
	for _, tc := range []struct {
		name, mode string
		want       bool
	}{
		{"LoginEvent", "", true}, {"LoginEvent", "auto", true}, {"ApiEvent", "auto", true}, {"ReportEvent", "", true},
		{"Audit__b", "", true}, {"LoginHistory", "", false}, {"ApiAnomalyEventStore", "auto", false},
		{"LoginHistory", "true", true}, {"LoginEvent", "false", false},
	} {
		got, err := sfrules.IsBigObject(tc.name, tc.mode)
		if err != nil || got != tc.want {
			t.Errorf("%s with big_object %q: %v, %v; want %v", tc.name, tc.mode, got, err, tc.want)
		}
	}
}

package domain_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
)

func TestLeaseRecordRoundTrip(t *testing.T) {
	r := domain.LeaseRecord{Holder: "a", Instance: "i", Epoch: 7, Renewals: 3, TTL: "30s",
		AcquiredAt: t0, RenewedAt: t0.Add(time.Second), ExpiresAt: t0.Add(31 * time.Second)}
	got, err := domain.DecodeLeaseRecord(r.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if got.Holder != r.Holder || got.Epoch != 7 || got.Renewals != 3 || !got.ExpiresAt.Equal(r.ExpiresAt) {
		t.Fatalf("round trip: %+v", got)
	}
}

func TestDecodeLeaseRecordRejects(t *testing.T) {
	for doc, want := range map[string]string{
		`{"holder":"a"`:               "not a JSON object",
		`null`:                        "not a JSON object",
		`["a"]`:                       "not a JSON object",
		`{"epoch":1}`:                 "no holder",
		`{"holder":5}`:                "holder is not a string",
		`{"holder":"a","epoch":true}`: "epoch is not a number",
		`{"holder":"a","epoch":1.5}`:  "not a non-negative integer",
		`{"holder":"a","epoch":-1}`:   "not a non-negative integer",
	} {
		_, err := domain.DecodeLeaseRecord([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", doc, err, want)
		}
	}
	if r, err := domain.DecodeLeaseRecord([]byte(`{"holder":"a","future_field":{"x":1}}`)); err != nil || r.Epoch != 0 {
		t.Fatalf("unknown fields must be ignored: %+v %v", r, err)
	}
}

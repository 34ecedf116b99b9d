package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// LeaseRecord is the lease document. ExpiresAt, RenewedAt and AcquiredAt are
// written for humans and are never read back for expiry decisions: a standby
// judges staleness only by how long the object's Version has stayed unchanged
// on its own clock.
type LeaseRecord struct {
	// Holder is the holder id of the leader, or "" when the lease is
	// released (claimable at once).
	Holder string `json:"holder"`
	// Instance identifies one process lifetime of the holder. A lease with our
	// holder id but another instance (a restart, a duplicated id) is foreign.
	Instance string `json:"instance,omitempty"`
	// Epoch is the fencing token: +1 on every acquisition, kept on renewal
	// and release.
	Epoch uint64 `json:"epoch"`
	// Renewals counts writes within the epoch; it makes every write's bytes
	// unique, so content-hash versions (S3 ETags) always change.
	Renewals uint64 `json:"renewals"`
	// TTL is the writer's lease duration; a standby waits at least
	// max(its own ttl, this) of unchanged Version before taking over.
	TTL string `json:"ttl,omitempty"`
	// Departed, on a released lease, is the holder that released it as it
	// stopped: the other replicas count it gone without waiting for its
	// membership heartbeat to go stale.
	Departed string `json:"departed,omitempty"`
	// AcquiredAt, RenewedAt and ExpiresAt are the writer's wall clock, for
	// humans.
	AcquiredAt time.Time `json:"acquired_at,omitzero"`
	RenewedAt  time.Time `json:"renewed_at,omitzero"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
}

// Encode renders the record as JSON.
func (r LeaseRecord) Encode() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		// A struct of strings, integers and times always marshals.
		panic(fmt.Sprintf("encode lease record: %v", err))
	}
	return b
}

// ttl returns the writer's declared ttl, or 0 when absent or unreadable.
func (r LeaseRecord) ttl() time.Duration {
	d, err := time.ParseDuration(r.TTL)
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// DecodeLeaseRecord parses a lease document. It requires a JSON object with
// a string holder and a non-negative integer epoch (booleans and fractions
// are rejected); unknown fields are ignored so newer writers stay readable.
func DecodeLeaseRecord(data []byte) (LeaseRecord, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return LeaseRecord{}, fmt.Errorf("not a JSON object: %w", err)
	}
	if raw == nil {
		return LeaseRecord{}, fmt.Errorf("not a JSON object: null")
	}
	h, ok := raw["holder"]
	if !ok {
		return LeaseRecord{}, fmt.Errorf("no holder field")
	}
	if !bytes.HasPrefix(bytes.TrimSpace(h), []byte(`"`)) {
		return LeaseRecord{}, fmt.Errorf("holder is not a string")
	}
	if e, ok := raw["epoch"]; ok {
		var n json.Number
		dec := json.NewDecoder(bytes.NewReader(e))
		dec.UseNumber()
		if err := dec.Decode(&n); err != nil {
			return LeaseRecord{}, fmt.Errorf("epoch is not a number: %s", e)
		}
		if _, err := parseEpoch(n.String()); err != nil {
			return LeaseRecord{}, err
		}
	}
	var r LeaseRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return LeaseRecord{}, fmt.Errorf("malformed lease record: %w", err)
	}
	return r, nil
}

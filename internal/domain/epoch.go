package domain

import (
	"fmt"
	"strconv"
)

// MaxEpoch is the largest epoch a lease or a checkpoint document may carry:
// 2^31-1, the range of a Kubernetes Lease's leaseTransitions, so every
// backend stores an epoch exactly. At one takeover a second it lasts 68
// years. A stored epoch above it is refused as corrupt, and a keeper whose
// next epoch would pass it does not contend (it reports why), so an epoch
// can never wrap to 0 and switch fencing off.
const MaxEpoch uint64 = 1<<31 - 1

// ParseEpoch parses a decimal epoch in [0, MaxEpoch].
func ParseEpoch(s string) (uint64, error) { return parseEpoch(s) }

// parseEpoch parses a decimal epoch in [0, MaxEpoch].
func parseEpoch(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("epoch %q is not a non-negative integer", s)
	}
	if n > MaxEpoch {
		return 0, fmt.Errorf("epoch %d is above the maximum %d", n, MaxEpoch)
	}
	return n, nil
}

func formatEpoch(n uint64) string { return strconv.FormatUint(n, 10) }

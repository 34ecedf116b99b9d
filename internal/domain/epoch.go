package domain

import (
	"fmt"
	"strconv"
)

// parseEpoch parses a decimal, non-negative epoch.
func parseEpoch(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("epoch %q is not a non-negative integer", s)
	}
	return n, nil
}

func formatEpoch(n uint64) string { return strconv.FormatUint(n, 10) }

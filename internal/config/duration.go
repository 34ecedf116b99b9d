package config

import (
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
)

// ParseDuration is time.ParseDuration with two more units, as the older
// implementation's configuration wrote them: d (24h) and w (7 days), so
// lookback: 1d and 1w reach back one day and one week. Days are 24 hours of
// elapsed time, not calendar days. Each d or w term is rewritten in exact
// decimal hours and the whole is read by time.ParseDuration, which keeps
// its precision and its overflow checks.
func ParseDuration(s string) (time.Duration, error) {
	if !strings.ContainsAny(s, "dw") {
		return time.ParseDuration(s)
	}
	invalid := fmt.Errorf("time: invalid duration %q", s)
	var b strings.Builder
	rest := s
	if rest != "" && (rest[0] == '-' || rest[0] == '+') {
		b.WriteByte(rest[0])
		rest = rest[1:]
	}
	if rest == "" {
		return 0, invalid
	}
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] == '.' || rest[i] >= '0' && rest[i] <= '9') {
			i++
		}
		j := i
		for j < len(rest) && rest[j] != '.' && (rest[j] < '0' || rest[j] > '9') {
			j++
		}
		num, unit := rest[:i], rest[i:j]
		if num == "" || num == "." || unit == "" || strings.Count(num, ".") > 1 {
			return 0, invalid
		}
		switch unit {
		case "d", "w":
			hours := map[string]int64{"d": 24, "w": 7 * 24}[unit]
			r, ok := new(big.Rat).SetString(num)
			if !ok {
				return 0, invalid
			}
			r.Mul(r, new(big.Rat).SetInt64(hours))
			decimals := 0
			if k := strings.IndexByte(num, '.'); k >= 0 {
				decimals = len(num) - k - 1
			}
			b.WriteString(r.FloatString(decimals))
			b.WriteString("h")
		default:
			b.WriteString(num + unit)
		}
		rest = rest[j:]
	}
	d, err := time.ParseDuration(b.String())
	if err != nil {
		return 0, invalid
	}
	return d, nil
}

// durationHook decodes a string into a time.Duration with ParseDuration.
func durationHook() mapstructure.DecodeHookFuncType {
	return func(from, to reflect.Type, data any) (any, error) {
		if from.Kind() != reflect.String || to != reflect.TypeFor[time.Duration]() {
			return data, nil
		}
		return ParseDuration(strings.TrimSpace(data.(string)))
	}
}

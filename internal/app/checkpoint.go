package app

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/internal/adapters/synthetic"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// checkKey refuses a key that cannot be shown or typed back: empty, with
// control characters, or holding U+FFFD (what invalid UTF-8 and lone
// surrogate escapes decode to).
func checkKey(key string) error {
	switch {
	case key == "":
		return errors.New("an empty key names no checkpoint")
	case strings.ContainsRune(key, utf8.RuneError):
		return fmt.Errorf("the key %q holds U+FFFD (invalid UTF-8 or a lone surrogate escape in the input)", key)
	case strings.ContainsFunc(key, unicode.IsControl):
		return fmt.Errorf("the key %q holds a control character (tab, newline, …); checkpoint keys are printable", key)
	}
	return nil
}

// CheckCheckpoint checks a key and, for the key families the sources
// write, that the name is one the source can have and that the value is a
// position it can resume from: what the daemon would otherwise find
// unreadable and skip.
func CheckCheckpoint(key, value string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if strings.ContainsRune(value, utf8.RuneError) {
		return fmt.Errorf("the value of %q holds U+FFFD (invalid UTF-8 or a lone surrogate escape in the input)", key)
	}
	if key == domain.EgressKey {
		return domain.CheckEgressRecord(value)
	}
	family, name, ok := strings.Cut(key, ":")
	if key == salesforce.ApexLogKey { // one key, no name
		family, ok = key, true
	}
	if !ok {
		return nil // not a source's key (a custom or newer one): stored as given
	}
	var nameErr, valueErr error
	switch family + ":" {
	case salesforce.SOQLKeyPrefix:
		if !sfrules.ValidName(name) {
			nameErr = fmt.Errorf("%q is not an object name (letters, digits and _)", name)
		}
		valueErr = salesforce.CheckSOQLCheckpoint(value)
	case salesforce.ELFKeyPrefix:
		if !sfrules.ValidName(name) {
			nameErr = fmt.Errorf("%q is not an event type name (letters, digits and _)", name)
		}
		valueErr = salesforce.CheckELFCheckpoint(value)
	case salesforce.ApexLogKey + ":":
		if name != "" {
			nameErr = fmt.Errorf("the ApexLog source's key is %s alone", salesforce.ApexLogKey)
		}
		valueErr = salesforce.CheckApexLogCheckpoint(value)
	case pubsub.KeyPrefix:
		if !sfrules.ValidTopic(name) {
			nameErr = fmt.Errorf("%q is not a topic (/event/<Name> or /data/<Name>)", name)
		}
		valueErr = pubsub.CheckReplayID(value)
	case synthetic.KeyPrefix:
		if name == "" {
			nameErr = errors.New("an empty event type")
		}
		valueErr = synthetic.CheckSequence(value)
	default:
		return nil
	}
	switch {
	case nameErr != nil:
		return fmt.Errorf("%s: %w", key, nameErr)
	case value == "":
		return fmt.Errorf("%s: an empty value is no position; to start the source from its default, use sf2loki state delete %s", key, key)
	case valueErr != nil:
		return fmt.Errorf("%s: %w", key, valueErr)
	}
	return nil
}

// Showable prints s as it is, or Go-quoted when it holds anything that
// would break the key<TAB>value lines (control characters, invalid UTF-8,
// other unprintable runes) or starts with a quote.
func Showable(s string) string {
	if utf8.ValidString(s) && !strings.HasPrefix(s, `"`) && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) {
		return s
	}
	return strconv.Quote(s)
}

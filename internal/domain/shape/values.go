package shape

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// masked replaces a value mask cannot keep any part of.
const masked = "***"

// HashLen is the length of a hashed value: 16 hex characters, the first 8
// bytes of HMAC-SHA-256(salt, value).
const HashLen = 16

// hasher computes the hash action's values with one key (the salt).
type hasher struct {
	pool sync.Pool // of *keyed
}

// keyed is one HMAC state and a buffer for the value (Write takes bytes).
type keyed struct {
	mac hash.Hash
	buf []byte
}

func newHasher(salt []byte) *hasher {
	key := append([]byte(nil), salt...)
	h := &hasher{}
	h.pool.New = func() any { return &keyed{mac: hmac.New(sha256.New, key)} }
	return h
}

// sum is the hashed form of v: the first HashLen hex characters of
// HMAC-SHA-256(salt, v).
func (h *hasher) sum(v string) string {
	k := h.pool.Get().(*keyed)
	k.mac.Reset()
	k.buf = append(k.buf[:0], v...)
	_, _ = k.mac.Write(k.buf)
	var buf [sha256.Size]byte
	sum := k.mac.Sum(buf[:0])
	if cap(k.buf) > 64<<10 {
		k.buf = nil // do not keep a huge value's buffer
	}
	h.pool.Put(k)
	var out [HashLen]byte
	hex.Encode(out[:], sum[:HashLen/2])
	return string(out[:])
}

// maskString keeps what identifies no one: an e-mail address its domain
// (***@acme.com), an IPv4 address its /24 (10.1.2.x), an IPv6 address its
// /48 (2001:db8:1::x: the first three groups, then ::x); anything else
// becomes ***. A value is an e-mail address only as a whole (see
// emailDomain): text or a URI that holds one becomes ***. The empty string
// stays empty.
func maskString(v string) string {
	if v == "" {
		return v
	}
	if a, err := netip.ParseAddr(v); err == nil {
		return maskAddr(a)
	}
	if domain, ok := emailDomain(v); ok {
		return masked + "@" + domain
	}
	return masked
}

// emailDomain is the domain of v when v is an e-mail address and nothing
// else: a local part without spaces before the last @, and after it a host
// name: labels of letters, digits and hyphens joined by dots, at least two,
// none empty, the last holding a letter (so not an IP address).
func emailDomain(v string) (string, bool) {
	at := strings.LastIndexByte(v, '@')
	if at <= 0 || at == len(v)-1 {
		return "", false
	}
	local, domain := v[:at], v[at+1:]
	if strings.ContainsFunc(local, unicode.IsSpace) || !strings.Contains(domain, ".") {
		return "", false
	}
	hostChar := func(r rune) bool { return r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) }
	for label := range strings.SplitSeq(domain, ".") {
		if label == "" || strings.ContainsFunc(label, func(r rune) bool { return !hostChar(r) }) {
			return "", false
		}
	}
	if !strings.ContainsFunc(domain[strings.LastIndexByte(domain, '.')+1:], unicode.IsLetter) {
		return "", false
	}
	return domain, true
}

// maskAddr renders an address's /24 (IPv4, IPv4-mapped IPv6 included) or
// /48 (IPv6) with an x for the rest.
func maskAddr(a netip.Addr) string {
	a = a.Unmap()
	var b [48]byte
	out := b[:0]
	if a.Is4() {
		four := a.As4()
		for _, o := range four[:3] {
			out = strconv.AppendUint(out, uint64(o), 10)
			out = append(out, '.')
		}
		return string(append(out, 'x'))
	}
	six := a.As16()
	for i := 0; i < 6; i += 2 {
		out = strconv.AppendUint(out, uint64(six[i])<<8|uint64(six[i+1]), 16)
		out = append(out, ':')
	}
	return string(append(out, ":x"...))
}

// text is a value's JSON text: a string as it is, anything else as its
// compact JSON (nested maps with sorted keys, as the line shows them).
// ok is false for nil.
func text(v any) (s string, ok bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case json.Number:
		return string(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case int:
		return strconv.Itoa(x), true
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return strconv.FormatFloat(x, 'g', -1, 64), true // no JSON text
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return masked, true // a value JSON cannot write (a NaN inside): nothing of it is kept
	}
	return string(b), true
}

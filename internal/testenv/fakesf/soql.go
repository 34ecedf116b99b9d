package fakesf

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The subset of SOQL the fake org understands, parsed the way Salesforce
// documents it (SOQL and SOSL Reference, "SOQL SELECT Syntax", "Date
// Formats and Date Literals in WHERE Clauses", "FIELDS()"; Big Objects
// Implementation Guide, "SOQL with Big Objects"):
//
//	SELECT FIELDS(ALL|STANDARD|CUSTOM) | field, … FROM object
//	  [WHERE cond] [ORDER BY field [ASC|DESC] [NULLS FIRST|LAST], …] [LIMIT n]
//
// where cond combines `field op value` (op = != < <= > >=) and
// `field IN ('a', …)` with AND, OR,
// NOT and parentheses, and a value is a 'string', a number, a date
// (YYYY-MM-DD) or a dateTime in one of the three documented forms:
// YYYY-MM-DDThh:mm:ssZ, YYYY-MM-DDThh:mm:ss+hh:mm, YYYY-MM-DDThh:mm:ss-hh:mm.
// Anything else, a dateTime with fractional seconds included, is a
// MALFORMED_QUERY: the SOQL reference documents no fractional form.

// soqlError is an answer Salesforce gives a query it refuses: HTTP 400 and
// a JSON array of one {message, errorCode}.
type soqlError struct {
	code, msg string
}

func (e *soqlError) Error() string { return e.code + ": " + e.msg }

func malformed(format string, args ...any) error {
	return &soqlError{"MALFORMED_QUERY", fmt.Sprintf(format, args...)}
}

func badFilter(format string, args ...any) error {
	return &soqlError{"INVALID_QUERY_FILTER_OPERATOR", fmt.Sprintf(format, args...)}
}

// query is a parsed SELECT.
type query struct {
	fieldsFn string   // ALL, STANDARD or CUSTOM for FIELDS(…), else ""
	fields   []string // the explicit field list
	object   string
	where    expr
	order    []orderItem
	limit    int // -1: none
}

// sortRows orders rows as ORDER BY order does, comparing values with cmp
// (stable: rows equal on every item keep their order).
func sortRows(rows []map[string]any, order []orderItem, cmp func(a, b any) int) {
	slices.SortStableFunc(rows, func(a, b map[string]any) int {
		for _, it := range order {
			c := cmp(a[it.field], b[it.field])
			if it.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
}

type orderItem struct {
	field string
	desc  bool
}

// expr is a WHERE condition.
type expr interface {
	eval(row map[string]any) bool
}

type (
	andExpr struct{ l, r expr }
	orExpr  struct{ l, r expr }
	notExpr struct{ e expr }
	// cmpExpr is field op value.
	cmpExpr struct {
		field, op string
		val       value
	}
	// inExpr is field IN ('a', …).
	inExpr struct {
		field string
		vals  []string
	}
)

// value is a literal: a dateTime, a date, a string or a number.
type value struct {
	kind string // datetime, date, string, number
	t    time.Time
	s    string
	n    float64
}

func (e andExpr) eval(r map[string]any) bool { return e.l.eval(r) && e.r.eval(r) }
func (e orExpr) eval(r map[string]any) bool  { return e.l.eval(r) || e.r.eval(r) }
func (e notExpr) eval(r map[string]any) bool { return !e.e.eval(r) }

// eval: a null field never matches.
func (e inExpr) eval(r map[string]any) bool {
	s, ok := r[e.field].(string)
	return ok && slices.Contains(e.vals, s)
}

func (e cmpExpr) eval(r map[string]any) bool {
	c, ok := compareValue(r[e.field], e.val)
	if !ok {
		return false // null never matches a comparison (but see !=)
	}
	switch e.op {
	case "=":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	default: // >=
		return c >= 0
	}
}

// compareValue compares a row's field with a literal of the field's type.
func compareValue(field any, v value) (int, bool) {
	switch v.kind {
	case "datetime":
		s, _ := field.(string)
		t, err := time.Parse(restTime, s)
		if err != nil {
			return 0, false
		}
		return t.Compare(v.t), true
	case "number":
		f, ok := field.(float64)
		if !ok {
			return 0, false
		}
		return cmp.Compare(f, v.n), true
	default:
		s, ok := field.(string)
		if !ok {
			return 0, false
		}
		return strings.Compare(s, v.s), true
	}
}

// restTime is how the REST API writes a dateTime value:
// 2026-11-28T09:59:01.360+0000.
const restTime = "2006-01-02T15:04:05.000-0700"

var (
	soqlDateTime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(Z|[+-]\d{2}:\d{2})$`)
	soqlDate     = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	soqlNumber   = regexp.MustCompile(`^-?\d+(\.\d+)?$`)
)

// ParseDateTimeLiteral reads a SOQL dateTime literal in one of its three
// documented forms; fractional seconds are refused.
func ParseDateTimeLiteral(s string) (time.Time, error) {
	if !soqlDateTime.MatchString(s) {
		return time.Time{}, fmt.Errorf("%q is not a SOQL dateTime (YYYY-MM-DDThh:mm:ssZ, YYYY-MM-DDThh:mm:ss+hh:mm or YYYY-MM-DDThh:mm:ss-hh:mm)", s)
	}
	t, err := time.Parse("2006-01-02T15:04:05Z07:00", s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a SOQL dateTime: %w", s, err)
	}
	return t.UTC(), nil
}

// token is one lexical item of a query.
type token struct {
	kind string // ident, string, literal (number/date/dateTime), op, punct, eof
	text string
	pos  int
}

func lex(q string) ([]token, error) {
	var out []token
	i := 0
	for i < len(q) {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(' || c == ')' || c == ',':
			out = append(out, token{"punct", string(c), i})
			i++
		case c == '=':
			out = append(out, token{"op", "=", i})
			i++
		case c == '!' || c == '<' || c == '>':
			op := string(c)
			if i+1 < len(q) && q[i+1] == '=' {
				op += "="
			}
			if op == "!" {
				return nil, malformed("unexpected character '!' at column %d", i+1)
			}
			out = append(out, token{"op", op, i})
			i += len(op)
		case c == '\'':
			var b strings.Builder
			j := i + 1
			for ; j < len(q) && q[j] != '\''; j++ {
				if q[j] == '\\' && j+1 < len(q) {
					j++
				}
				b.WriteByte(q[j])
			}
			if j >= len(q) {
				return nil, malformed("unterminated string at column %d", i+1)
			}
			out = append(out, token{"string", b.String(), i})
			i = j + 1
		case c >= '0' && c <= '9' || c == '-':
			j := i + 1
			for j < len(q) && strings.IndexByte("0123456789-:+.TZ", q[j]) >= 0 {
				j++
			}
			out = append(out, token{"literal", q[i:j], i})
			i = j
		case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
			j := i + 1
			for j < len(q) && (q[j] == '_' || q[j] == '.' || q[j] >= 'A' && q[j] <= 'Z' || q[j] >= 'a' && q[j] <= 'z' || q[j] >= '0' && q[j] <= '9') {
				j++
			}
			out = append(out, token{"ident", q[i:j], i})
			i = j
		default:
			return nil, malformed("unexpected character %q at column %d", c, i+1)
		}
	}
	return append(out, token{"eof", "", len(q)}), nil
}

type parser struct {
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }

// keyword reports whether the next token is the keyword kw (any case) and
// consumes it if so.
func (p *parser) keyword(kw string) bool {
	if t := p.peek(); t.kind == "ident" && strings.EqualFold(t.text, kw) {
		p.i++
		return true
	}
	return false
}

func (p *parser) expect(kind, text string) error {
	t := p.next()
	if t.kind != kind || (text != "" && !strings.EqualFold(t.text, text)) {
		want := text
		if want == "" {
			want = kind
		}
		return malformed("unexpected token: '%s' at column %d, expected %s", t.text, t.pos+1, want)
	}
	return nil
}

// parseQuery parses one SELECT.
func parseQuery(q string) (*query, error) {
	toks, err := lex(q)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	out := &query{limit: -1}
	if err := p.expect("ident", "SELECT"); err != nil {
		return nil, err
	}
	for {
		t := p.next()
		if t.kind != "ident" {
			return nil, malformed("unexpected token: '%s' at column %d in the field list", t.text, t.pos+1)
		}
		if strings.EqualFold(t.text, "FIELDS") && p.peek().text == "(" {
			p.next()
			fn := strings.ToUpper(p.next().text)
			if fn != "ALL" && fn != "STANDARD" && fn != "CUSTOM" {
				return nil, malformed("FIELDS takes ALL, STANDARD or CUSTOM, not %s", fn)
			}
			if err := p.expect("punct", ")"); err != nil {
				return nil, err
			}
			if out.fieldsFn != "" {
				return nil, malformed("FIELDS(%s) and FIELDS(%s) in one query", out.fieldsFn, fn)
			}
			out.fieldsFn = fn
		} else {
			if slices.Contains(out.fields, t.text) {
				return nil, &soqlError{"INVALID_FIELD", "duplicate field selected: " + t.text}
			}
			out.fields = append(out.fields, t.text)
		}
		if p.peek().text != "," {
			break
		}
		p.next()
	}
	if err := p.expect("ident", "FROM"); err != nil {
		return nil, err
	}
	obj := p.next()
	if obj.kind != "ident" {
		return nil, malformed("unexpected token: '%s' at column %d, expected an object", obj.text, obj.pos+1)
	}
	out.object = obj.text
	if p.keyword("WHERE") {
		if out.where, err = p.or(); err != nil {
			return nil, err
		}
	}
	if p.keyword("ORDER") {
		if err := p.expect("ident", "BY"); err != nil {
			return nil, err
		}
		for {
			f := p.next()
			if f.kind != "ident" {
				return nil, malformed("unexpected token: '%s' at column %d in ORDER BY", f.text, f.pos+1)
			}
			item := orderItem{field: f.text}
			if p.keyword("DESC") {
				item.desc = true
			} else {
				p.keyword("ASC")
			}
			if p.keyword("NULLS") {
				if !p.keyword("FIRST") && !p.keyword("LAST") {
					return nil, malformed("NULLS takes FIRST or LAST")
				}
			}
			out.order = append(out.order, item)
			if p.peek().text != "," {
				break
			}
			p.next()
		}
	}
	if p.keyword("LIMIT") {
		n := p.next()
		v, err := strconv.Atoi(n.text)
		if n.kind != "literal" || err != nil || v < 0 {
			return nil, malformed("LIMIT takes a whole number, not '%s'", n.text)
		}
		out.limit = v
	}
	if t := p.peek(); t.kind != "eof" {
		return nil, malformed("unexpected token: '%s' at column %d", t.text, t.pos+1)
	}
	return out, nil
}

func (p *parser) or() (expr, error) {
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.keyword("OR") {
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		l = orExpr{l, r}
	}
	return l, nil
}

func (p *parser) and() (expr, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for p.keyword("AND") {
		r, err := p.unary()
		if err != nil {
			return nil, err
		}
		l = andExpr{l, r}
	}
	return l, nil
}

func (p *parser) unary() (expr, error) {
	if p.keyword("NOT") {
		e, err := p.unary()
		return notExpr{e}, err
	}
	if p.peek().text == "(" {
		p.next()
		e, err := p.or()
		if err != nil {
			return nil, err
		}
		return e, p.expect("punct", ")")
	}
	f := p.next()
	if f.kind != "ident" {
		return nil, malformed("unexpected token: '%s' at column %d, expected a field", f.text, f.pos+1)
	}
	op := p.next()
	if op.kind == "ident" && strings.EqualFold(op.text, "IN") {
		return p.in(f.text)
	}
	if op.kind != "op" {
		if op.kind == "ident" && (strings.EqualFold(op.text, "LIKE") ||
			strings.EqualFold(op.text, "NOT") || strings.EqualFold(op.text, "INCLUDES") || strings.EqualFold(op.text, "EXCLUDES")) {
			return nil, malformed("the fake org does not implement %s", op.text)
		}
		return nil, malformed("unexpected token: '%s' at column %d, expected an operator", op.text, op.pos+1)
	}
	v := p.next()
	var val value
	switch {
	case v.kind == "string":
		val = value{kind: "string", s: v.text}
	case v.kind == "literal" && soqlNumber.MatchString(v.text):
		n, _ := strconv.ParseFloat(v.text, 64)
		val = value{kind: "number", n: n}
	case v.kind == "literal" && soqlDate.MatchString(v.text):
		t, err := time.Parse("2006-01-02", v.text)
		if err != nil {
			return nil, malformed("%q is not a date", v.text)
		}
		val = value{kind: "date", t: t}
	case v.kind == "literal":
		t, err := ParseDateTimeLiteral(v.text)
		if err != nil {
			return nil, malformed("line 1:%d value of filter criterion for field '%s' must be of type dateTime and should not be enclosed in quotes: %v", v.pos+1, f.text, err)
		}
		val = value{kind: "datetime", t: t}
	default:
		return nil, malformed("unexpected token: '%s' at column %d, expected a value", v.text, v.pos+1)
	}
	return cmpExpr{field: f.text, op: op.text, val: val}, nil
}

// in parses the list of `field IN ('a', 'b', …)`: quoted strings only,
// at least one.
func (p *parser) in(field string) (expr, error) {
	if err := p.expect("punct", "("); err != nil {
		return nil, err
	}
	e := inExpr{field: field}
	for {
		v := p.next()
		if v.kind != "string" {
			return nil, malformed("unexpected token: '%s' at column %d, expected a quoted value in IN (…)", v.text, v.pos+1)
		}
		e.vals = append(e.vals, v.text)
		if p.peek().text != "," {
			break
		}
		p.next()
	}
	return e, p.expect("punct", ")")
}

// conjuncts returns the comparisons of a WHERE that is a plain AND of
// comparisons, and false when it holds OR or NOT.
func conjuncts(e expr) ([]cmpExpr, bool) {
	switch e := e.(type) {
	case nil:
		return nil, true
	case cmpExpr:
		return []cmpExpr{e}, true
	case inExpr:
		return []cmpExpr{{field: e.field, op: "IN"}}, true
	case andExpr:
		l, ok := conjuncts(e.l)
		r, ok2 := conjuncts(e.r)
		return append(l, r...), ok && ok2
	}
	return nil, false
}

// fields lists the field names a condition references.
func fieldsOf(e expr, out []string) []string {
	switch e := e.(type) {
	case cmpExpr:
		return append(out, e.field)
	case inExpr:
		return append(out, e.field)
	case andExpr:
		return fieldsOf(e.r, fieldsOf(e.l, out))
	case orExpr:
		return fieldsOf(e.r, fieldsOf(e.l, out))
	case notExpr:
		return fieldsOf(e.e, out)
	}
	return out
}

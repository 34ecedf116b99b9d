package pubsub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub/eventbus"
)

// ErrSchema is a schema that could not be fetched or parsed: the stream is
// torn down so the events replay once the schema can be had, never skipped.
var ErrSchema = errors.New("salesforce pubsub: event schema unavailable")

// ErrUndecodable is a payload its schema cannot decode: the event is
// skipped (its replay id still moves the checkpoint) and counted.
var ErrUndecodable = errors.New("salesforce pubsub: undecodable event payload")

// schemas caches parsed Avro schemas by schema id, fetching each once even
// when several topics ask at the same time.
type schemas struct {
	fetch func(ctx context.Context, id string) (string, error)

	mu       sync.Mutex
	byID     map[string]*eventSchema
	inflight map[string]*schemaFetch
}

// eventSchema is an event schema as the source decodes with it: every int
// and long without its logical type (so a datetime decodes to the epoch
// milliseconds on the wire, however the schema spells it), and the
// top-level fields the schema declares as datetimes.
type eventSchema struct {
	avro avro.Schema
	// datetimes are the top-level fields documented as Salesforce DateTimes
	// ("doc": "<Name>:DateTime") or declared timestamp-millis, in schema
	// order.
	datetimes []string
	// fast writes the line straight from the payload; nil when the schema
	// has what only the generic path decodes.
	fast *fastDecoder
	// names decode a change event header's field bitmaps; nil when the
	// schema has no ChangeEventHeader.
	names *fieldNames
}

type schemaFetch struct {
	done   chan struct{}
	schema *eventSchema
	err    error
}

func newSchemas(fetch func(ctx context.Context, id string) (string, error)) *schemas {
	return &schemas{fetch: fetch, byID: map[string]*eventSchema{}, inflight: map[string]*schemaFetch{}}
}

// get returns the schema for id, fetching it if nobody has.
func (c *schemas) get(ctx context.Context, id string) (*eventSchema, error) {
	c.mu.Lock()
	if s, ok := c.byID[id]; ok {
		c.mu.Unlock()
		return s, nil
	}
	f, ok := c.inflight[id]
	if !ok {
		// The id may alias a whole response (fetchCodec): the cache keeps
		// a copy.
		id = strings.Clone(id)
		f = &schemaFetch{done: make(chan struct{})}
		c.inflight[id] = f
		go c.load(ctx, id, f)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.schema, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *schemas) load(ctx context.Context, id string, f *schemaFetch) {
	text, err := c.fetch(context.WithoutCancel(ctx), id)
	if err == nil {
		f.schema, err = parseSchema([]byte(text))
	}
	if err != nil {
		f.err = fmt.Errorf("%w: schema %s: %w", ErrSchema, id, err)
	}
	c.mu.Lock()
	delete(c.inflight, id) // a failure is not cached: the next stream asks again
	if f.err == nil {
		c.byID[id] = f.schema
	}
	c.mu.Unlock()
	close(f.done)
}

// parseSchema parses an event schema without the logical types of its ints
// and longs, in a cache of its own (a named type another schema defined
// never stands in for one this schema lacks).
func parseSchema(text []byte) (*eventSchema, error) {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	out := &eventSchema{datetimes: datetimeFields(doc)}
	plainText, err := json.Marshal(withoutNumberLogicalTypes(doc))
	if err != nil {
		return nil, err
	}
	if out.avro, err = avro.ParseBytesWithCache(plainText, "", &avro.SchemaCache{}); err != nil {
		return nil, err
	}
	out.names = newFieldNames(out.avro)
	if out.fast, err = compileFast(out.avro, out.datetimes); err != nil && !errors.Is(err, errUnsupported) {
		return nil, err
	}
	return out, nil
}

// withoutNumberLogicalTypes drops the logicalType of every int and long
// in a schema document (timestamp-millis, date, time-millis, …): their
// values decode as the numbers on the wire.
func withoutNumberLogicalTypes(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if t, _ := x["type"].(string); t == "int" || t == "long" {
			delete(x, "logicalType")
		}
		for k, e := range x {
			x[k] = withoutNumberLogicalTypes(e)
		}
	case []any:
		for i, e := range x {
			x[i] = withoutNumberLogicalTypes(e)
		}
	}
	return v
}

// datetimeFields lists a record schema's top-level fields declared as
// datetimes: documented "<Name>:DateTime" as Salesforce does, or a long
// (nullable or not) with the timestamp-millis logical type.
func datetimeFields(doc any) []string {
	rec, _ := doc.(map[string]any)
	fields, _ := rec["fields"].([]any)
	var out []string
	for _, f := range fields {
		m, _ := f.(map[string]any)
		name, _ := m["name"].(string)
		d, _ := m["doc"].(string)
		if name != "" && (strings.HasSuffix(d, ":DateTime") || isTimestampMillis(m["type"])) {
			out = append(out, name)
		}
	}
	return out
}

func isTimestampMillis(t any) bool {
	switch x := t.(type) {
	case map[string]any:
		return x["type"] == "long" && x["logicalType"] == "timestamp-millis"
	case []any: // a union: ["null", {"type": "long", "logicalType": …}]
		for _, b := range x {
			if isTimestampMillis(b) {
				return true
			}
		}
	}
	return false
}

// decoded is an event as decoded: the record as the generic path decodes
// it (unions as their value, never as {"type": value}; ints and longs as
// the numbers sent), or the line the fast path wrote straight from the
// payload with the fields time and level read.
type decoded struct {
	rec   map[string]any // the generic path's record
	line  string         // the fast path's line; "" on the generic path
	probe probe
	// datetimes are the schema's datetime fields.
	datetimes []string
	// bitmapErr is why a ChangeEventHeader field list was shipped as it
	// came (its bitmaps do not decode against the schema), nil otherwise.
	bitmapErr error
}

// changeType is a change event's ChangeEventHeader.changeType (CREATE,
// UPDATE, …, GAP_OVERFLOW), "" for any other event.
func (d *decoded) changeType() string {
	if d.line != "" {
		return d.probe.changeType()
	}
	h, _ := d.rec["ChangeEventHeader"].(map[string]any)
	s, _ := h["changeType"].(string)
	return s
}

// field is a top-level field as the generic path decodes it, nil when
// absent or null; on the fast path, only a field time or level reads.
func (d *decoded) field(name string) any {
	if d.line == "" {
		return d.rec[name]
	}
	return d.probe.field(name)
}

// level is the event's level (salesforce.RecordLevel).
func (d *decoded) level() string {
	if d.line == "" {
		return salesforce.RecordLevel(d.rec)
	}
	return salesforce.Level(d.probe.text)
}

// time is the event's time (eventTime).
func (d *decoded) time() (time.Time, bool) {
	if d.line == "" {
		return eventTime(d.field, d.datetimes)
	}
	return d.probe.eventTime(d.datetimes)
}

// decode decodes an event's Avro payload: with fast set and a schema the
// fast path compiled, into its line (written by w, the topic's writer);
// otherwise, or for an event only the generic path writes (a NaN or an
// infinity), into a record.
func (c *schemas) decode(ctx context.Context, ev *eventbus.ProducerEvent, fast bool, w *writer) (decoded, error) {
	schema, err := c.get(ctx, ev.GetSchemaId())
	if err != nil {
		return decoded{}, err
	}
	out := decoded{datetimes: schema.datetimes}
	if schema.fast != nil {
		// Where the fast path compiled, it reads every payload first, even
		// for a topic that needs the record: a payload it refuses never
		// reaches the generic decoder, which allocates a block count no
		// payload can hold before it fails, and faults (a crash, not a
		// panic) on a count of -2^63.
		line, probe, err := schema.fast.write(w, ev.GetPayload())
		switch {
		case err == nil && fast:
			out.line, out.probe, out.bitmapErr = w.keep(line), probe, probe.bitmapErr
			return out, nil
		case err != nil && !errors.Is(err, errFallback):
			return decoded{}, fmt.Errorf("%w (event %s, schema %s): %w", ErrUndecodable, ev.GetId(), ev.GetSchemaId(), err)
		}
	}
	if out.rec, out.bitmapErr, err = schema.decodeRecord(ev.GetPayload()); err != nil {
		return decoded{}, fmt.Errorf("%w (event %s, schema %s): %w", ErrUndecodable, ev.GetId(), ev.GetSchemaId(), err)
	}
	return out, nil
}

// decodeGeneric is decodeRecord without the bitmaps' error.
func (s *eventSchema) decodeGeneric(payload []byte) (map[string]any, error) {
	rec, _, err := s.decodeRecord(payload)
	return rec, err
}

// decodeRecord decodes a payload into a map, unwraps its unions and
// writes a change event header's field bitmaps as names; bitmapErr says
// why a list was left as it came.
func (s *eventSchema) decodeRecord(payload []byte) (rec map[string]any, bitmapErr, err error) {
	if err := decodePayload(s.avro, payload, &rec); err != nil {
		return nil, nil, err
	}
	out, _ := plain(s.avro, rec).(map[string]any)
	return out, s.names.apply(out), nil
}

// decodePayload decodes one payload. It reports a payload that ends early
// (avro.Unmarshal does not) and turns a decoder panic on hostile input
// into an error.
func decodePayload(schema avro.Schema, payload []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panic: %v", r)
		}
	}()
	r := avro.NewReader(nil, 0, avro.WithReaderConfig(genericConfig)).Reset(payload)
	r.ReadVal(schema, v)
	return r.Error
}

// genericConfig bounds what the generic decoder allocates for one array or
// map to a million items: a Pub/Sub event is at most 1 MB, so only a
// corrupt or hostile block count asks for more.
var genericConfig = avro.Config{MaxSliceAllocSize: 1 << 20}.Freeze()

// plain walks v along schema and unwraps the single-key maps the decoder
// uses for union branches of named types ({"com.sforce.eventbus.Address":
// {...}} becomes {...}).
func plain(schema avro.Schema, v any) any {
	switch s := schema.(type) {
	case *avro.RecordSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		for _, f := range s.Fields() {
			if fv, ok := m[f.Name()]; ok {
				m[f.Name()] = plain(f.Type(), fv)
			}
		}
		return m
	case *avro.UnionSchema:
		if m, ok := v.(map[string]any); ok && len(m) == 1 {
			for _, t := range s.Types() {
				name := string(t.Type())
				if n, ok := t.(avro.NamedSchema); ok {
					name = n.FullName()
				}
				if inner, ok := m[name]; ok {
					return plain(t, inner)
				}
			}
		}
		for _, t := range s.Types() { // a nullable branch decoded as its value
			if t.Type() != avro.Null {
				if _, isRec := t.(*avro.RecordSchema); !isRec {
					return plain(t, v)
				}
			}
		}
		return v
	case *avro.ArraySchema:
		if a, ok := v.([]any); ok {
			for i := range a {
				a[i] = plain(s.Items(), a[i])
			}
		}
		return v
	case *avro.MapSchema:
		if m, ok := v.(map[string]any); ok {
			for k := range m {
				m[k] = plain(s.Values(), m[k])
			}
		}
		return v
	case *avro.RefSchema:
		return plain(s.Schema(), v)
	default:
		return v
	}
}

// eventTime is when an event happened, from the event alone (so every
// copy of a replayed event gets the same time): a change event (one with a
// ChangeEventHeader) is timed by its commitTimestamp, never by the
// CreatedDate in its body, which an UNDELETE carries from the record's
// creation; any other event by its EventDate, else its CreatedDate, else
// the first other field its schema declares a datetime (datetimes); field
// returns a top-level field as the generic path decodes it. Times
// are Avro longs in epoch milliseconds (an ISO string is read too). ok is
// false when none holds a time.
func eventTime(field func(string) any, datetimes []string) (time.Time, bool) {
	if h, ok := field("ChangeEventHeader").(map[string]any); ok {
		return timeOf(h["commitTimestamp"])
	}
	for _, fields := range [][]string{{"EventDate", "CreatedDate"}, datetimes} {
		for _, f := range fields {
			if t, ok := timeOf(field(f)); ok {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

func timeOf(v any) (time.Time, bool) {
	switch x := v.(type) {
	case int64: // an Avro long: how Salesforce sends datetimes
		return time.UnixMilli(x).UTC(), x > 0
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		return t.UTC(), err == nil
	}
	return time.Time{}, false
}

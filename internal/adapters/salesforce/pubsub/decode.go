package pubsub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hamba/avro/v2"

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
	byID     map[string]avro.Schema
	inflight map[string]*schemaFetch
}

type schemaFetch struct {
	done   chan struct{}
	schema avro.Schema
	err    error
}

func newSchemas(fetch func(ctx context.Context, id string) (string, error)) *schemas {
	return &schemas{fetch: fetch, byID: map[string]avro.Schema{}, inflight: map[string]*schemaFetch{}}
}

// get returns the schema for id, fetching it if nobody has.
func (c *schemas) get(ctx context.Context, id string) (avro.Schema, error) {
	c.mu.Lock()
	if s, ok := c.byID[id]; ok {
		c.mu.Unlock()
		return s, nil
	}
	f, ok := c.inflight[id]
	if !ok {
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
		f.schema, err = avro.ParseBytes([]byte(text))
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

// decode turns an event's Avro payload into a plain record: unions appear
// as their value, never as {"type": value}.
func (c *schemas) decode(ctx context.Context, ev *eventbus.ProducerEvent) (map[string]any, error) {
	schema, err := c.get(ctx, ev.GetSchemaId())
	if err != nil {
		return nil, err
	}
	var rec map[string]any
	if err := decodePayload(schema, ev.GetPayload(), &rec); err != nil {
		return nil, fmt.Errorf("%w (event %s, schema %s): %w", ErrUndecodable, ev.GetId(), ev.GetSchemaId(), err)
	}
	out, _ := plain(schema, rec).(map[string]any)
	return out, nil
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
	r := avro.NewReader(nil, 0).Reset(payload)
	r.ReadVal(schema, v)
	return r.Error
}

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

// eventTime is the record's EventDate, else CreatedDate, else its
// ChangeEventHeader.commitTimestamp (Avro longs in epoch milliseconds; an
// ISO string, or a timestamp-millis logical type, is read too). ok is false
// when none is there.
func eventTime(rec map[string]any) (time.Time, bool) {
	if t, ok := timeOf(rec["EventDate"]); ok {
		return t, true
	}
	if t, ok := timeOf(rec["CreatedDate"]); ok {
		return t, true
	}
	if h, ok := rec["ChangeEventHeader"].(map[string]any); ok {
		return timeOf(h["commitTimestamp"])
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
	case time.Time:
		return x.UTC(), !x.IsZero()
	}
	return time.Time{}, false
}

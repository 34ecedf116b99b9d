package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// shapeMetrics are the transforms' and sampling's counters.
type shapeMetrics struct {
	filtered, sampledOut metric.Int64Counter
}

func (t *Recorder) shapeInstruments(m metric.Meter) error {
	var err error
	if t.shape.filtered, err = m.Int64Counter("sf2loki_rows_filtered",
		metric.WithDescription("Rows a drop_row transform dropped, by source and rule (its name, or <action>#<position>); their checkpoints still move. Labelled shard=<org> when orgs are configured.")); err != nil {
		return err
	}
	t.shape.sampledOut, err = m.Int64Counter("sf2loki_entries_sampled_out",
		metric.WithDescription("Rows sampling left out, by source and event type (an EventLogFile type, an object, a Pub/Sub topic); their checkpoints still move. Labelled shard=<org> when orgs are configured."))
	return err
}

// shapeAttrs are a counter's labels, with the shard's (none in the
// single-org form).
func shapeAttrs(shard string, kv ...attribute.KeyValue) metric.AddOption {
	if shard != "" {
		kv = append(kv, attribute.String("shard", shard))
	}
	return metric.WithAttributes(kv...)
}

// RowFiltered counts a row a drop_row rule of source dropped.
func (t *Recorder) RowFiltered(shard, source, rule string) {
	t.shape.filtered.Add(context.Background(), 1, shapeAttrs(shard, attribute.String("source", source), attribute.String("rule", rule)))
}

// EntrySampledOut counts a row sampling left out.
func (t *Recorder) EntrySampledOut(shard, source, eventType string) {
	t.shape.sampledOut.Add(context.Background(), 1, shapeAttrs(shard, attribute.String("source", source), attribute.String("event_type", eventType)))
}

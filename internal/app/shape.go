package app

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain/shape"
)

// transformSalt is the key of the hash transforms: sources.transform_salt,
// else the content of sources.transform_salt_file (trimmed), read only
// when a hash transform needs it.
func transformSalt(src config.Sources) (string, error) {
	if salt := strings.TrimSpace(src.TransformSalt); salt != "" || src.TransformSaltFile == "" || src.HashRule() == "" {
		return salt, nil
	}
	b, err := os.ReadFile(src.TransformSaltFile)
	if err != nil {
		return "", fmt.Errorf("sources.transform_salt_file: %w (the daemon's user must be able to read it)", err)
	}
	salt := strings.TrimSpace(string(b))
	if salt == "" {
		return "", fmt.Errorf("sources.transform_salt_file %s is empty: a blank salt is a missing salt", src.TransformSaltFile)
	}
	return salt, nil
}

// sourceShaper builds the transforms and sampling of one source (one of
// config.ShapeSources) of cfg's org, counted in t (if set); nil when the
// source has neither.
func sourceShaper(cfg *config.Config, source string, t *Telemetry) (*shape.Shaper, error) {
	sc := cfg.Sources.Shape(source)
	if len(sc.Rules) == 0 && len(sc.Sample) == 0 {
		return nil, nil
	}
	salt, err := transformSalt(cfg.Sources)
	if err != nil {
		return nil, err
	}
	sc.Salt = salt
	if t != nil {
		shard := cfg.ShardName
		sc.Filtered = func(rule string) { t.RowFiltered(shard, source, rule) }
		sc.SampledOut = func(eventType string) { t.EntrySampledOut(shard, source, eventType) }
	}
	return shape.New("sources."+source, sc)
}

// shapeMetrics are the transforms' and sampling's counters.
type shapeMetrics struct {
	filtered, sampledOut metric.Int64Counter
}

func (t *Telemetry) shapeInstruments(m metric.Meter) error {
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
func (t *Telemetry) RowFiltered(shard, source, rule string) {
	t.shape.filtered.Add(context.Background(), 1, shapeAttrs(shard, attribute.String("source", source), attribute.String("rule", rule)))
}

// EntrySampledOut counts a row sampling left out.
func (t *Telemetry) EntrySampledOut(shard, source, eventType string) {
	t.shape.sampledOut.Add(context.Background(), 1, shapeAttrs(shard, attribute.String("source", source), attribute.String("event_type", eventType)))
}

// checkTransforms is the doctor's row on an org's transforms and sampling:
// SKIP without any, FAIL when they cannot be built as the daemon builds
// them (an unreadable transform_salt_file), WARN for a hash without a
// salt.
func checkTransforms(cfg *config.Config) Check {
	if !cfg.Sources.Shaped() {
		return Check{"transforms", Skip, "no source has transforms or sample"}
	}
	rules := 0
	for _, src := range config.ShapeSources {
		if _, err := sourceShaper(cfg, src, nil); err != nil {
			return Check{"transforms", Fail, err.Error()}
		}
		rules += len(cfg.Sources.Shape(src).Rules)
	}
	if path := cfg.Sources.HashRule(); path != "" && !cfg.Sources.Salted() {
		return Check{"transforms", Warn, config.UnsaltedHashWarning("", path)}
	}
	detail := fmt.Sprintf("%d rules compile", rules)
	switch {
	case cfg.Sources.HashRule() == "":
	case strings.TrimSpace(cfg.Sources.TransformSalt) != "":
		detail += "; hashes keyed by transform_salt"
	default:
		detail += "; hashes keyed by transform_salt_file " + cfg.Sources.TransformSaltFile
	}
	return Check{"transforms", Pass, detail}
}

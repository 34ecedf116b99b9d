package app

import (
	"fmt"
	"os"
	"strings"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain/shape"
	"github.com/sf2loki/sf2loki/internal/telemetry"
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

// SourceShaper builds the transforms and sampling of one source (one of
// config.ShapeSources) of cfg's org, counted in t (if set); nil when the
// source has neither.
func SourceShaper(cfg *config.Config, source string, t *telemetry.Recorder) (*shape.Shaper, error) {
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

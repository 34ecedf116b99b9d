package doctor

import (
	"fmt"
	"strings"

	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
)

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
		if _, err := app.SourceShaper(cfg, src, nil); err != nil {
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

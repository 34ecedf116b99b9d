package config

// Option changes a loaded configuration before it is validated.
type Option func(*Config)

// DryRun is run --dry-run: sink.stdout.enabled.
func DryRun(c *Config) { c.Sink.Stdout.Enabled = true }

// lokiURLMissing reports whether a source would have nowhere to push:
// no sink.loki.url and no dry run.
func (c *Config) lokiURLMissing() bool {
	return c.Sink.Loki.URL == "" && !c.Sink.Stdout.Enabled
}

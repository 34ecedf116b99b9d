package config

import "fmt"

// egressWarnings are the sink.loki.egress settings that work but may
// surprise.
func (c *Config) egressWarnings() []string {
	e := c.Sink.Loki.Egress
	var w []string
	if e.DailyByteBudget > 0 && e.BudgetAction == "drop" {
		w = append(w, "sink.loki.egress.budget_action drop: once the day's budget is spent, rows are discarded and their checkpoints move: "+
			"they are never shipped (counted in sf2loki_loki_entries_dropped_total{reason=\"budget\"}); pause holds them until 00:00 UTC instead")
	}
	b, each := e.DailyByteBudget, ""
	if n := int64(len(c.Orgs)); e.Scope == "deployment" && n > 1 {
		b, each = (b+n-1)/n, fmt.Sprintf(" (each of the %d orgs' share with scope deployment)", n)
	}
	if b > 0 && b < int64(c.Sink.Loki.Batch.MaxBytes) {
		w = append(w, fmt.Sprintf("sink.loki.egress.daily_byte_budget %d%s is below one batch (sink.loki.batch.max_bytes %d): "+
			"a batch is admitted while the day's use is below the budget, so a day may ship up to one batch more than the budget", b, each, c.Sink.Loki.Batch.MaxBytes))
	}
	return w
}

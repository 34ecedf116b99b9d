package backfill

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// Label is the stream label a backfill adds to its entries (on by
// default): its rows stay apart from the daemon's streams, so neither
// meets Loki's out-of-order window behind the other.
const Label = "backfill"

// Backfill pacing: a file whose download fails is tried this many times in
// all; a push Loki does not accept (after the sink's own retries) is tried
// again after backfillPushWait, twice that, …
var (
	backfillFileTries = 3
	backfillFileWait  = 5 * time.Second
	backfillPushWait  = 10 * time.Second
)

// Loki's defaults a backfill may meet (limits_config).
const (
	lokiRejectOldSamplesMaxAge = 7 * 24 * time.Hour
	lokiOutOfOrderWindow       = time.Hour // max_chunk_age (2h) / 2
	lokiHostedRetention        = 30 * 24 * time.Hour
)

// backfillOptions are the command's flags.
type backfillOptions struct {
	config, org, since, until, interval, label, state string
	eventTypes                                        []string
	concurrency, pushRetries                          int
	noLabel                                           bool
}

// backfillPlan is what a backfill does, from its flags and the
// configuration.
type backfillPlan struct {
	since, until time.Time
	types        []string
	interval     string
	concurrency  int
	// label is the backfill label's value ("" without it).
	label       string
	pushRetries int
}

func usageErr(format string, args ...any) error {
	return &app.ExitError{Code: app.ExitInvalidConfig, Err: fmt.Errorf(format, args...)}
}

// NewCommand returns sf2loki backfill.
func NewCommand() *cobra.Command {
	var o backfillOptions
	cmd := &cobra.Command{
		Use:   "backfill --since DATE [--until DATE]",
		Short: "Load EventLogFile history into Loki once, resumably",
		Long: "backfill lists the org's EventLogFiles with a LogDate in [--since, --until) and pushes every row through the\n" +
			"daemon's Loki sink (its labels, the eventlogfile transforms, no sampling), at the rows' own times, labelled\n" +
			"backfill=\"true\". The files done are kept in a state of its own (beside the checkpoint document:\n" +
			"<state>.backfill.json), which the daemon never reads: running the same command again skips them.\n" +
			"One backfill at a time per state (a lock). Exit 0 when every file is done, 1 when it stopped or a file\n" +
			"failed (re-run to resume), 2 for bad flags or configuration.",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErr("backfill takes no arguments (got %q); the flags say what to load", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return runBackfill(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.config, "config", "c", "", "YAML configuration file (the daemon's)")
	f.StringVar(&o.org, "org", "", "the org to load (required when orgs are configured)")
	f.StringVar(&o.since, "since", "", "the first LogDate to load: YYYY-MM-DD (UTC) or RFC 3339 (required)")
	f.StringVar(&o.until, "until", "", "the LogDate to stop before: YYYY-MM-DD (UTC) or RFC 3339 (default: now)")
	f.StringSliceVar(&o.eventTypes, "event-types", nil, "event types, comma-separated, or * for every type the org has (default: sources.eventlogfile.event_types)")
	f.StringVar(&o.interval, "interval", "", "auto, Hourly or Daily (default: sources.eventlogfile.interval); auto reads each day from its Daily file, or its Hourly files while it has none")
	f.IntVar(&o.concurrency, "concurrency", 0, "event types loaded at once, 1 to 16 (default: sources.eventlogfile.concurrency); the files of one type go one after another, oldest first")
	f.StringVar(&o.label, "label", Label+"=true", "the stream label added to every entry: "+Label+"=VALUE")
	f.BoolVar(&o.noLabel, "no-backfill-label", false, "add no label: the rows go into the daemon's streams (see Loki's out-of-order window)")
	f.StringVar(&o.state, "state", "", "keep the backfill state in this local file (default: beside the checkpoint document, <state>"+backfillSuffix+")")
	f.IntVar(&o.pushRetries, "push-retries", 3, "how many more times a push Loki did not accept (after the sink's own retries) is tried before the backfill stops")
	return cmd
}

// parseDate reads YYYY-MM-DD (UTC midnight) or RFC 3339.
func parseDate(flag, v string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usageErr("--%s %q is not a date like 2026-11-01 (UTC) or 2026-11-01T06:00:00Z", flag, v)
	}
	return t.UTC(), nil
}

// plan checks the flags and fills what they leave out from the shard's
// configuration.
func (o backfillOptions) plan(cmd *cobra.Command, cfg *config.Config, now time.Time) (backfillPlan, error) {
	var p backfillPlan
	if o.since == "" {
		return p, usageErr("--since is required: the first LogDate to load, e.g. --since %s", now.AddDate(0, 0, -7).Format(time.DateOnly))
	}
	var err error
	if p.since, err = parseDate("since", o.since); err != nil {
		return p, err
	}
	p.until = now
	if o.until != "" {
		if p.until, err = parseDate("until", o.until); err != nil {
			return p, err
		}
	}
	if !p.since.Before(p.until) {
		return p, usageErr("--since %s is not before --until %s", p.since.Format(time.RFC3339), p.until.Format(time.RFC3339))
	}
	if p.since.After(now) {
		return p, usageErr("--since %s is in the future", p.since.Format(time.RFC3339))
	}
	elf := cfg.Sources.EventLogFile
	p.types = elf.EventTypes
	if len(o.eventTypes) > 0 {
		p.types = nil
		for _, t := range o.eventTypes {
			if t = strings.TrimSpace(t); t != "" {
				p.types = append(p.types, t)
			}
		}
	}
	if len(p.types) == 0 {
		return p, usageErr("no event types to load: pass --event-types API,Login (or *), or set sources.eventlogfile.event_types")
	}
	for _, t := range p.types {
		if t != "*" && !sfrules.ValidName(t) {
			return p, usageErr("--event-types: %q is not an event type (letters, digits and _) or *", t)
		}
	}
	p.interval = cmp.Or(o.interval, elf.Interval, salesforce.IntervalAuto)
	switch strings.ToLower(p.interval) {
	case "auto":
		p.interval = salesforce.IntervalAuto
	case "hourly":
		p.interval = salesforce.IntervalHourly
	case "daily":
		p.interval = salesforce.IntervalDaily
	default:
		return p, usageErr("--interval %q is not auto, Hourly or Daily", p.interval)
	}
	p.concurrency = elf.Concurrency
	if cmd.Flags().Changed("concurrency") {
		p.concurrency = o.concurrency
	}
	if p.concurrency == 0 {
		p.concurrency = 4
	}
	if p.concurrency < 1 || p.concurrency > 16 {
		return p, usageErr("--concurrency %d is not between 1 and 16", p.concurrency)
	}
	if o.pushRetries < 0 {
		return p, usageErr("--push-retries %d is negative", o.pushRetries)
	}
	p.pushRetries = o.pushRetries
	if o.noLabel {
		if cmd.Flags().Changed("label") {
			return p, usageErr("--label and --no-backfill-label contradict each other: pass one")
		}
		return p, nil
	}
	k, v, ok := strings.Cut(o.label, "=")
	switch {
	case !ok || k != Label:
		return p, usageErr("--label %q: the backfill's label is %s=VALUE (Loki stream labels are an allowlist: see docs/pipeline.md)", o.label, Label)
	case v == "" || strings.ContainsFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }):
		return p, usageErr("--label %q: the value must be printable and not empty (or pass --no-backfill-label)", o.label)
	}
	p.label = v
	return p, nil
}

// backfillWarnings are the warnings about Loki's limits a plan meets.
func backfillWarnings(p backfillPlan, now time.Time) []string {
	var out []string
	age := now.Sub(p.since)
	if age > lokiRejectOldSamplesMaxAge {
		out = append(out, fmt.Sprintf("--since %s is %s old: a default Loki refuses entries older than 7 days "+
			"(limits_config.reject_old_samples: true, reject_old_samples_max_age: 1w). Raise reject_old_samples_max_age "+
			"for the tenant the backfill pushes to, or backfill into a tenant configured for it; a file whose rows Loki "+
			"refuses is not marked done, and the backfill stops", p.since.Format(time.DateOnly), days(age)))
	}
	if age > lokiHostedRetention {
		out = append(out, fmt.Sprintf("--since %s is %s old: entries older than the tenant's retention_period "+
			"(limits_config; 0, Loki's default, keeps them; hosted Lokis often keep 30 days) are deleted at the next "+
			"compaction: check that it covers the range", p.since.Format(time.DateOnly), days(age)))
	}
	if p.label == "" {
		out = append(out, fmt.Sprintf("--no-backfill-label: the rows go into the daemon's own streams, and Loki accepts "+
			"a stream's entries only up to max_chunk_age/2 (%s by default, unordered_writes) behind its newest one while "+
			"the stream is in the ingester: while the daemon ingests these types, older rows are refused. Keep the label, "+
			"or let the daemon's streams go idle first", lokiOutOfOrderWindow))
	}
	return out
}

func days(d time.Duration) string {
	if d < 48*time.Hour {
		return d.Round(time.Hour).String()
	}
	return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
}

// backfillWork is one event type's files still to do, oldest first.
type backfillWork struct {
	eventType string
	files     []salesforce.HistoryFile
}

// backfillRun is one run's shared state.
type backfillRun struct {
	plan     backfillPlan
	src      *salesforce.ELFSource
	state    *backfillState
	progress *backfillProgress
	log      *slog.Logger
	clock    ports.Clock
	batch    config.Batch
	// stop ends the run with a cause (the first one stays).
	stop context.CancelCauseFunc

	mu       sync.Mutex
	failures []string
	refused  atomic.Int64
}

// backfillWorker pushes one event type at a time through its own view of
// the sink (so that what Loki refused is known per file).
type backfillWorker struct {
	sink  ports.Sink
	stats *loki.Stats
}

func runBackfill(cmd *cobra.Command, o backfillOptions) error {
	ctx, stopSignals := app.OnSignals(cmd.Context())
	defer stopSignals()
	clk := clock.New()
	all, err := app.LoadConfig(cmd.ErrOrStderr(), o.config, config.CheckFilesOf(o.org))
	if err != nil {
		return err
	}
	cfg, err := app.ShardOf(all, o.org)
	if err != nil {
		return &app.ExitError{Code: app.ExitInvalidConfig, Err: err}
	}
	plan, err := o.plan(cmd, cfg, clk.Now())
	if err != nil {
		return err
	}
	if cfg.Salesforce.AuthMode == "" {
		return usageErr("backfill reads the org of salesforce: set salesforce.auth_mode and its credentials")
	}
	progress := newBackfillProgress(cmd.ErrOrStderr(), clk)
	log := app.RedactLogger(app.NewLogger(progress, "warn", "text"), cfg)
	run, workers, cleanup, err := newBackfillRun(ctx, cfg, all, o.state, plan, progress, log, clk)
	if err != nil {
		return app.RedactErr(cfg, err)
	}
	defer cleanup()
	return app.RedactErr(cfg, run.execute(ctx, cmd.OutOrStdout(), workers, cfg))
}

// newBackfillRun builds the source, the sinks (one per worker) and opens
// the backfill state, lock taken.
func newBackfillRun(ctx context.Context, cfg, all *config.Config, statePath string, plan backfillPlan, progress *backfillProgress,
	log *slog.Logger, clk ports.Clock) (*backfillRun, []backfillWorker, func(), error) {
	ctx = app.WithLibraryLogger(ctx, log)
	var closers []func()
	cleanup := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*backfillRun, []backfillWorker, func(), error) {
		cleanup()
		var exit *app.ExitError
		if !errors.As(err, &exit) {
			err = &app.ExitError{Code: app.ExitInvalidConfig, Err: err}
		}
		return nil, nil, nil, err
	}
	auth, err := app.NewSalesforceAuthObserved(cfg.ShardName, cfg.Salesforce, 0, log, nil)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { _ = auth.Close() })
	sh, err := app.SourceShaper(cfg, "eventlogfile", nil)
	if err != nil {
		return fail(err)
	}
	src, err := salesforce.NewELFSource(auth, cfg.Salesforce.APIVersion, salesforce.ELFSpec{Interval: plan.interval, EventTypes: plan.types,
		Concurrency: plan.concurrency, Shaper: sh, Types: app.ELFTypeSpecs(cfg.Sources.EventLogFile.Types)}, clk, log)
	if err != nil {
		return fail(err)
	}
	var workers []backfillWorker
	var prepares []func(context.Context) error
	for range plan.concurrency {
		base, err := app.NewLokiSink(cfg.Sink.Loki, log, nil)
		if err != nil {
			return fail(err)
		}
		sink, prepare, err := app.OrgSink(cfg, base, auth, clk, log)
		if err != nil {
			return fail(err)
		}
		if prepare != nil {
			prepares = append(prepares, prepare)
		}
		workers = append(workers, backfillWorker{sink: sink, stats: base.Stats})
	}
	state, err := openBackfillState(ctx, cfg, all, statePath)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, state.release)
	if err := state.load(ctx, cfg.ShardName); err != nil {
		return fail(&app.ExitError{Code: 1, Err: err})
	}
	run := &backfillRun{plan: plan, src: src, state: state, progress: progress, log: log, clock: clk, batch: cfg.Sink.Loki.Batch}
	for _, prepare := range prepares {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := prepare(pctx)
		cancel()
		if err != nil {
			return fail(&app.ExitError{Code: 1, Err: fmt.Errorf("cannot learn the org's id for the sf_org_id label: %w; set salesforce.org_id", err)})
		}
	}
	return run, workers, cleanup, nil
}

// execute lists the files, loads those not done and prints the summary.
func (r *backfillRun) execute(parent context.Context, stdout io.Writer, workers []backfillWorker, cfg *config.Config) error {
	p, start := r.progress, r.clock.Now()
	what := "eventlogfile " + strings.Join(r.plan.types, ", ")
	if cfg.ShardName != "" {
		what = "org " + cfg.ShardName + ": " + what
	}
	label := "without a backfill label"
	if r.plan.label != "" {
		label = fmt.Sprintf("labelled %s=%q", Label, r.plan.label)
	}
	p.printf("backfill: %s, files with a LogDate from %s to %s (interval %s), %s", what, r.plan.since.Format(time.RFC3339),
		r.plan.until.Format(time.RFC3339), r.plan.interval, label)
	p.printf("backfill: state %s (%s done before), lock %s", r.state.store, app.Plural(int64(r.state.size()), "file"), r.state.lockName)
	if n := r.state.olderNotice(); n != "" {
		p.printf("backfill: %s", n)
	}
	for _, w := range backfillWarnings(r.plan, start) {
		p.printf("warning: %s", w)
	}
	work, listed, skipped, err := r.list(parent)
	if err != nil {
		return &app.ExitError{Code: 1, Err: fmt.Errorf("list the EventLogFiles: %w", err)}
	}
	var files, bytesTotal int64
	known := true
	for _, w := range work {
		for _, f := range w.files {
			files++
			bytesTotal += f.Length
			known = known && f.Length > 0
		}
	}
	if !known {
		bytesTotal = 0
	}
	switch {
	case listed == 0:
		p.printf("backfill: no EventLogFile of %s has a LogDate in the range", strings.Join(r.plan.types, ", "))
	case files == 0:
		p.printf("backfill: %s listed: all %d done before (skipped); nothing to do", app.Plural(int64(listed), "file"), skipped)
	default:
		p.printf("backfill: %s listed: %d done before (skipped), %d to do (%s), %s at once",
			app.Plural(int64(listed), "file"), skipped, files, salesforce.ByteSize(bytesTotal), app.Plural(int64(min(r.plan.concurrency, len(work))), "event type"))
	}

	ctx, stop := context.WithCancelCause(parent)
	defer stop(nil)
	r.stop = stop
	if r.state.lost != nil {
		go func() {
			select {
			case <-r.state.lost:
				stop(fmt.Errorf("lost the backfill lock: %w", r.state.lostErr()))
			case <-ctx.Done():
			}
		}()
	}
	flushed := make(chan struct{})
	go r.flushEvery(ctx, flushed)
	p.begin(files, bytesTotal)
	queue := make(chan backfillWork)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for item := range queue {
				r.loadType(ctx, w, item)
			}
		})
	}
	for _, item := range work {
		select {
		case queue <- item:
		case <-ctx.Done():
		}
	}
	close(queue)
	wg.Wait()
	p.end()
	stop(nil)
	<-flushed
	fctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 30*time.Second)
	flushErr := r.state.flush(fctx)
	cancel()

	done, failed := p.done.Load(), p.failed.Load()
	outcome := "finished"
	cause := context.Cause(ctx)
	if errors.Is(cause, context.Canceled) && parent.Err() == nil {
		cause = nil // ended normally
	}
	if parent.Err() != nil {
		cause = context.Cause(parent)
	}
	if cause != nil || failed > 0 || flushErr != nil {
		outcome = "stopped"
	}
	left := files - done - failed
	refused := ""
	if n := r.refused.Load(); n > 0 {
		refused = fmt.Sprintf(" (%s refused by Loki)", thousands(n))
	}
	fmt.Fprintf(stdout, "backfill %s in %s: %d files done, %d skipped (done before), %d failed, %d left; %s rows%s, %s\n", outcome,
		r.clock.Now().Sub(start).Round(time.Second), done, skipped, failed, left, thousands(p.rows.Load()), refused, salesforce.ByteSize(p.bytes.Load()))
	resume := fmt.Sprintf("run the same command again to resume: it skips the %s recorded done in %s", app.Plural(int64(r.state.size()), "file"), r.state.store)
	var sig *app.Signalled
	switch {
	case flushErr != nil:
		return &app.ExitError{Code: 1, Err: fmt.Errorf("backfill: %w; the files done since the last write of the state are loaded again by the next run", flushErr)}
	case errors.As(cause, &sig):
		return &app.ExitError{Code: 1, Err: fmt.Errorf("backfill interrupted (%w): %s", sig, resume)}
	case cause != nil:
		return &app.ExitError{Code: 1, Err: fmt.Errorf("backfill stopped: %w; %s", cause, resume)}
	case failed > 0:
		r.mu.Lock()
		defer r.mu.Unlock()
		return &app.ExitError{Code: 1, Err: fmt.Errorf("backfill: %s failed (%s); %s", app.Plural(failed, "file"), strings.Join(r.failures, "; "), resume)}
	}
	return nil
}

// list lists every type's files in the range and sets aside those done.
func (r *backfillRun) list(ctx context.Context) (work []backfillWork, listed, skipped int, err error) {
	types, err := r.src.HistoryTypes(ctx)
	if err != nil {
		return nil, 0, 0, err
	}
	var oldest time.Time
	for _, t := range types {
		files, err := r.src.History(ctx, t, r.plan.since, r.plan.until)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", t, err)
		}
		listed += len(files)
		item := backfillWork{eventType: t}
		for _, f := range files {
			if oldest.IsZero() || f.LogDate.Before(oldest) {
				oldest = f.LogDate
			}
			if r.state.done(f) {
				skipped++
				continue
			}
			item.files = append(item.files, f)
		}
		if len(item.files) > 0 {
			work = append(work, item)
		}
	}
	if !oldest.IsZero() && oldest.Sub(r.plan.since) >= 48*time.Hour {
		r.progress.printf("backfill: the oldest file listed is of %s: the org has no older EventLogFile of these types "+
			"(it keeps them for a limited time, and writes none for a day without events)", oldest.Format(time.DateOnly))
	}
	return work, listed, skipped, nil
}

// flushEvery writes the state every second while the run lasts (the last
// write is the caller's).
func (r *backfillRun) flushEvery(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.clock.After(time.Second):
		}
		if err := r.state.flush(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("backfill: cannot write the state; trying again", "error", err)
		}
	}
}

// loadType loads one type's files in order; a file that keeps failing
// leaves the type's later files to the next run.
func (r *backfillRun) loadType(ctx context.Context, w backfillWorker, item backfillWork) {
	for i, f := range item.files {
		if ctx.Err() != nil {
			return
		}
		rows, err := r.loadFile(ctx, w, f)
		switch {
		case err == nil:
			r.state.mark(f, rows)
			r.progress.done.Add(1)
		case ctx.Err() != nil:
			return
		default:
			r.progress.failed.Add(1)
			r.mu.Lock()
			r.failures = append(r.failures, fmt.Sprintf("%s %s: %v", f.EventType, f.ID, err))
			r.mu.Unlock()
			r.log.Error("backfill: a file failed; the event type's later files are left for the next run", "event_type", f.EventType,
				"file", f.ID, "log_date", f.LogDate.Format(time.RFC3339), "left", len(item.files)-i-1, "error", err)
			return
		}
	}
}

// loadFile pushes every row of f, in order, in batches; it tries a failed
// download again (the rows pushed before are pushed again: identical
// entries, which Loki stores once). A push that keeps failing, a refusal of
// rows by Loki, or the org's API limit stops the run.
func (r *backfillRun) loadFile(ctx context.Context, w backfillWorker, f salesforce.HistoryFile) (int64, error) {
	for try := 1; ; try++ {
		rows, read, err := r.readFile(ctx, w, f)
		if err != nil { // the next try counts them again
			r.progress.rows.Add(-rows)
			r.progress.bytes.Add(-read)
		}
		var stop *backfillStop
		switch {
		case err == nil:
			return rows, nil
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case errors.As(err, &stop):
			r.stop(stop.err)
			return 0, stop.err
		case errors.Is(err, salesforce.ErrThrottled):
			err = fmt.Errorf("the org's API request limit is used up (%w): run again once it resets", err)
			r.stop(err)
			return 0, err
		case try >= backfillFileTries:
			return 0, fmt.Errorf("%s: %w", app.Plural(int64(try), "try"), err)
		}
		wait := time.Duration(try) * backfillFileWait
		r.log.Warn("backfill: a download failed; trying the file again", "event_type", f.EventType, "file", f.ID, "try", try, "wait", wait, "error", err)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-r.clock.After(wait):
		}
	}
}

// backfillStop is an error of the sink, which stops the whole run.
type backfillStop struct{ err error }

func (e *backfillStop) Error() string { return e.err.Error() }

// readFile reads f once, pushing its rows in batches of sink.loki.batch;
// it returns the rows pushed and the bytes read, an error too.
func (r *backfillRun) readFile(ctx context.Context, w backfillWorker, f salesforce.HistoryFile) (rows, read int64, err error) {
	var batch []ports.Entry
	var size int
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := r.push(ctx, w, f, batch); err != nil {
			return &backfillStop{err}
		}
		rows += int64(len(batch))
		r.progress.rows.Add(int64(len(batch)))
		batch, size = batch[:0], 0
		return nil
	}
	maxEntries, maxBytes := cmp.Or(r.batch.MaxEntries, 1000), cmp.Or(r.batch.MaxBytes, 1<<20)
	err = r.src.ReadHistory(ctx, f, func(e ports.Entry) error {
		if r.plan.label != "" {
			// The source's entries share their labels map: add to a copy.
			e.Labels = maps.Clone(e.Labels)
			e.Labels[Label] = r.plan.label
		}
		batch = append(batch, e)
		size += len(e.Line)
		if len(batch) >= maxEntries || size >= maxBytes {
			return flush()
		}
		return nil
	}, func(n int) { read += int64(n); r.progress.bytes.Add(int64(n)) })
	if err == nil {
		err = flush()
	}
	return rows, read, err
}

// push sends one batch, trying again while Loki does not accept it, up to
// --push-retries more times. Rows Loki refuses for themselves (too old, too
// long) fail the push: the file is not marked done.
func (r *backfillRun) push(ctx context.Context, w backfillWorker, f salesforce.HistoryFile, batch []ports.Entry) error {
	for try := 0; ; try++ {
		before := dropped(w.stats)
		err := w.sink.Push(ctx, batch)
		if err == nil {
			if n := dropped(w.stats) - before; n > 0 {
				r.refused.Add(n)
				return fmt.Errorf("loki refused %d rows of %s file %s (LogDate %s) for themselves (the WARN above says why: too old, "+
					"too far behind, too long): the file is not marked done; raise the tenant's limits (see docs/operations.md, "+
					"Backfilling history) or move --since", n, f.EventType, f.ID, f.LogDate.Format(time.RFC3339))
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if try >= r.plan.pushRetries || !ports.IsTransient(err) {
			return fmt.Errorf("loki did not accept a push after %s: %w", app.Plural(int64(try+1), "try"), err)
		}
		wait := time.Duration(1<<try) * backfillPushWait
		r.log.Warn("backfill: loki did not accept a push; trying again", "try", try+1, "of", r.plan.pushRetries+1, "wait", wait, "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.clock.After(wait):
		}
	}
}

// dropped is how many entries the sink dropped so far, for any reason.
func dropped(s *loki.Stats) int64 {
	var n int64
	for _, v := range s.Dropped() {
		n += v
	}
	return n
}

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/file"
	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/doctor"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// stateSession is an open checkpoint document for the state command.
type stateSession struct {
	cfg *config.Config
	// configured is the whole configuration (cfg is the org's shard).
	configured *config.Config
	committer  *domain.CheckpointCommitter
	store      ports.ObjectCAS
	release    func()
}

// openState loads the configuration and opens the checkpoint document
// through the same store and committer the daemon uses (no fence: the
// command is the operator's).
func openState(cmd *cobra.Command, cfgPath, org string) (*stateSession, error) {
	all, err := app.LoadConfig(cmd.ErrOrStderr(), cfgPath)
	if err != nil {
		return nil, err
	}
	cfg, err := app.ShardOf(all, org)
	if err != nil {
		return nil, &app.ExitError{Code: app.ExitInvalidConfig, Err: err}
	}
	store, err := app.NewStateStore(cmd.Context(), cfg)
	if err != nil {
		return nil, &app.ExitError{Code: app.ExitInvalidConfig, Err: err}
	}
	c, err := domain.NewCheckpointCommitter(store, clock.New(), domain.CommitterConfig{})
	if err != nil {
		return nil, err
	}
	return &stateSession{cfg: cfg, configured: all, committer: c, store: store, release: app.Closer(store)}, nil
}

// readState opens the document and returns a copy of it.
func readState(cmd *cobra.Command, cfgPath, org string) (map[string]string, error) {
	s, err := openState(cmd, cfgPath, org)
	if err != nil {
		return nil, err
	}
	defer s.release()
	doc, err := s.committer.Load(cmd.Context())
	if err != nil {
		return nil, &app.ExitError{Code: 1, Err: err}
	}
	return doc, nil
}

// ensureNoLeader refuses a write while a daemon may lead: a lease with a
// holder, or the noop instance lock held. It returns a release function for
// the instance lock it takes for the duration of the write.
func (s *stateSession) ensureNoLeader(ctx context.Context, force bool) (func(), error) {
	none := func() {}
	if force {
		return none, nil
	}
	c := s.cfg.Coordinate
	if c.Type == config.CoordinateNoop {
		if s.cfg.State.Store != config.StoreFile {
			return none, nil
		}
		if s.configured != nil {
			if err := app.ShardDir(s.configured.State.File.Path, s.cfg.State.File.Path); err != nil {
				return nil, err
			}
		}
		lock, err := file.LockInstance(s.cfg.State.File.Path, 0)
		if err != nil {
			return nil, &app.ExitError{Code: 1, Err: fmt.Errorf("%w; stop the daemon first, or pass --force", err)}
		}
		return func() { _ = lock.Release() }, nil
	}
	lease, err := app.NewLeaseStore(ctx, s.cfg)
	if err != nil {
		return nil, err
	}
	defer app.Closer(lease)()
	obj, err := lease.Get(ctx)
	if errors.Is(err, ports.ErrNotFound) {
		return none, nil
	}
	if err != nil {
		return nil, &app.ExitError{Code: 1, Err: fmt.Errorf("cannot read the lease %s to check for a running leader: %w (pass --force to write anyway)", lease, err)}
	}
	rec, err := domain.DecodeLeaseRecord(obj.Data)
	if err != nil || rec.Holder != "" {
		who := fmt.Sprintf("holder %q, epoch %d, last renewal %s", rec.Holder, rec.Epoch, rec.RenewedAt.Format("2006-01-02T15:04:05Z07:00"))
		if err != nil {
			who = "unreadable: " + err.Error()
		}
		return nil, &app.ExitError{Code: 1, Err: fmt.Errorf("a leader may be running: the lease %s is held (%s); stop the daemons first, or pass --force", lease, who)}
	}
	return none, nil
}

// writeErr maps a failed write to the command's exit codes.
func writeErr(err error) error {
	if errors.Is(err, domain.ErrConflict) {
		return &app.ExitError{Code: 1, Err: fmt.Errorf("another writer raced; retry: %w", err)}
	}
	return &app.ExitError{Code: 1, Err: err}
}

func newStateCommand() *cobra.Command {
	var cfgPath, org string
	cmd := &cobra.Command{Use: "state", Short: "Show, repair, export and import the checkpoint document"}
	cmd.PersistentFlags().StringVarP(&cfgPath, "config", "c", "", "YAML configuration file")
	cmd.PersistentFlags().StringVar(&org, "org", "", "the org whose checkpoint document to use (required when orgs are configured)")

	var glob string
	var asJSON bool
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the checkpoints (key<TAB>value, sorted)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := readState(cmd, cfgPath, org)
			if err != nil {
				return err
			}
			match := globMatcher(glob)
			out := map[string]string{}
			for k, v := range doc {
				if !domain.Reserved(k) && match(k) {
					out[k] = v
				}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			keys := slices.Sorted(maps.Keys(out))
			for _, k := range keys {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", app.Showable(k), app.Showable(out[k]))
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%d keys\n", len(keys))
			return err
		},
	}
	show.Flags().StringVar(&glob, "key", "", "only keys matching this glob")
	show.Flags().BoolVar(&asJSON, "json", false, "print a JSON object")

	var force, forceReserved bool
	write := func(use, short string, args cobra.PositionalArgs, run func(cmd *cobra.Command, s *stateSession, args []string) error) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Args: args, RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openState(cmd, cfgPath, org)
			if err != nil {
				return err
			}
			defer s.release()
			unlock, err := s.ensureNoLeader(cmd.Context(), force)
			if err != nil {
				return err
			}
			defer unlock()
			return run(cmd, s, args)
		}}
		c.Flags().BoolVar(&force, "force", false, "write even though a daemon may be leading")
		return c
	}
	reserved := func(key string) error {
		switch {
		case key == domain.FenceEpochKey && !forceReserved:
			return &app.ExitError{Code: 1, Err: fmt.Errorf("%s is reserved for the leader epoch; pass --force-reserved to repair it", key)}
		case key == domain.OrgKey && !forceReserved:
			return &app.ExitError{Code: 1, Err: fmt.Errorf("%s is reserved: it names the org whose positions the document holds; pass --force-reserved to change it", key)}
		}
		return nil
	}
	set := write("set KEY VALUE", "Set one checkpoint (one compare-and-swap write)", cobra.ExactArgs(2),
		func(cmd *cobra.Command, s *stateSession, args []string) error {
			if err := reserved(args[0]); err != nil {
				return err
			}
			if !domain.Reserved(args[0]) {
				if err := app.CheckCheckpoint(args[0], args[1]); err != nil {
					return &app.ExitError{Code: app.ExitInvalidConfig, Err: fmt.Errorf("set: %w", err)}
				}
			}
			var err error
			if args[0] == domain.FenceEpochKey {
				n, perr := domain.ParseEpoch(args[1])
				if perr != nil {
					return &app.ExitError{Code: 1, Err: fmt.Errorf("%s: %w", args[0], perr)}
				}
				err = s.committer.ForceEpoch(cmd.Context(), n)
			} else {
				err = s.committer.Commit(cmd.Context(), args[0], args[1])
			}
			if err != nil {
				return writeErr(err)
			}
			return nil
		})
	set.Flags().BoolVar(&forceReserved, "force-reserved", false, "allow writing "+domain.FenceEpochKey+" or "+domain.OrgKey)
	del := write("delete KEY", "Delete one checkpoint (one compare-and-swap write)", cobra.ExactArgs(1),
		func(cmd *cobra.Command, s *stateSession, args []string) error {
			if err := reserved(args[0]); err != nil {
				return err
			}
			var err error
			if args[0] == domain.FenceEpochKey {
				err = s.committer.ForceEpoch(cmd.Context(), 0)
			} else {
				err = s.committer.Delete(cmd.Context(), args[0])
			}
			if err != nil {
				return writeErr(err)
			}
			return nil
		})
	del.Flags().BoolVar(&forceReserved, "force-reserved", false, "allow deleting "+domain.FenceEpochKey+" or "+domain.OrgKey)

	var includeReserved bool
	export := &cobra.Command{
		Use:   "export",
		Short: "Print the document as sorted, pretty JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := readState(cmd, cfgPath, org)
			if err != nil {
				return err
			}
			if !includeReserved {
				delete(doc, domain.FenceEpochKey)
				delete(doc, domain.OrgKey)
			}
			return writeJSON(cmd.OutOrStdout(), doc)
		},
	}
	export.Flags().BoolVar(&includeReserved, "include-reserved", false, "include "+domain.FenceEpochKey+" and "+domain.OrgKey)

	var ifEmpty bool
	imp := write("import FILE|-", "Merge the keys of a JSON object into the document (one compare-and-swap write)", cobra.ExactArgs(1),
		func(cmd *cobra.Command, s *stateSession, args []string) error {
			r := cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return &app.ExitError{Code: app.ExitInvalidConfig, Err: err}
				}
				defer f.Close()
				r = f
			}
			kv, err := decodeImport(r)
			if err != nil {
				return &app.ExitError{Code: app.ExitInvalidConfig, Err: fmt.Errorf("import: %w; nothing was written", err)}
			}
			if ifEmpty {
				doc, err := s.committer.Load(cmd.Context())
				if err != nil {
					return &app.ExitError{Code: 1, Err: err}
				}
				delete(doc, domain.FenceEpochKey)
				delete(doc, domain.OrgKey)
				if len(doc) > 0 {
					return &app.ExitError{Code: 1, Err: fmt.Errorf("import --if-empty: %s already holds %d keys", s.store, len(doc))}
				}
			}
			if err := s.committer.CommitMany(cmd.Context(), kv); err != nil {
				return writeErr(err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "imported %d keys into %s\n", len(kv), s.store)
			return err
		})
	imp.Flags().BoolVar(&ifEmpty, "if-empty", false, "refuse unless the target holds no checkpoints")

	cmd.AddCommand(show, set, del, export, imp)
	return cmd
}

// maxImportBytes bounds what import reads: the checkpoint document's cap.
const maxImportBytes = doctor.MaxStateDocumentBytes

// decodeImport reads one JSON object of strings and refuses anything that
// would be silently altered or lost on the way into the document: data
// after the object, invalid UTF-8 (or escapes decoding to U+FFFD), empty,
// duplicate or reserved keys, keys with control characters, and values of
// known keys that their source could not resume from.
func decodeImport(r io.Reader) (map[string]string, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxImportBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxImportBytes {
		return nil, fmt.Errorf("the input is larger than %d bytes, the cap of a checkpoint document", maxImportBytes)
	}
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			i += size
		}
		return nil, fmt.Errorf("the input is not valid UTF-8 (byte %d); convert it to UTF-8", i)
	}
	const shape = "the input must be one JSON object of strings, like {\"pubsub:/event/LoginEventStream\": \"AAAAAAAAAAE=\"}"
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", shape, err)
		}
		return nil, fmt.Errorf("%s, not %v", shape, describeToken(tok))
	}
	kv := map[string]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", shape, err)
		}
		k := tok.(string) // object keys are strings
		vt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", shape, err)
		}
		v, ok := vt.(string)
		if !ok {
			return nil, fmt.Errorf("the value of %q is %s, not a string", k, describeToken(vt))
		}
		if _, dup := kv[k]; dup {
			return nil, fmt.Errorf("the key %q appears twice; keep one", k)
		}
		if k == domain.FenceEpochKey {
			return nil, fmt.Errorf("%s is reserved for the leader epoch", k)
		}
		if k == domain.OrgKey {
			return nil, fmt.Errorf("%s is reserved: the daemon stamps the org whose positions a document holds; drop it from the input", k)
		}
		if err := app.CheckCheckpoint(k, v); err != nil {
			return nil, err
		}
		kv[k] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, fmt.Errorf("%s: %w", shape, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("there is more input after the JSON object (byte %d): import one object at a time", dec.InputOffset())
	}
	return kv, nil
}

// describeToken names a JSON token for an error message.
func describeToken(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		if tok == json.Delim('[') {
			return "an array"
		}
		return "an object"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", tok)
}

// globMatcher matches keys against a glob where * is any run of
// characters (slashes included: keys like pubsub:/event/X) and ? is one.
func globMatcher(glob string) func(string) bool {
	if glob == "" {
		return func(string) bool { return true }
	}
	var b strings.Builder
	b.WriteString("^")
	for _, r := range glob {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	re := regexp.MustCompile(b.String())
	return re.MatchString
}

func writeJSON(w io.Writer, v map[string]string) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

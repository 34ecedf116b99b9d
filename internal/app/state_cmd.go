package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/file"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// stateSession is an open checkpoint document for the state command.
type stateSession struct {
	cfg       *config.Config
	committer *domain.CheckpointCommitter
	store     ports.ObjectCAS
	release   func()
}

// openState loads the configuration and opens the checkpoint document
// through the same store and committer the daemon uses (no fence: the
// command is the operator's).
func openState(cmd *cobra.Command, cfgPath string) (*stateSession, error) {
	cfg, err := loadConfig(cmd, cfgPath)
	if err != nil {
		return nil, err
	}
	store, err := newStateStore(cmd.Context(), cfg)
	if err != nil {
		return nil, &ExitError{Code: ExitInvalidConfig, Err: err}
	}
	c, err := domain.NewCheckpointCommitter(store, clock.New(), domain.CommitterConfig{})
	if err != nil {
		return nil, err
	}
	return &stateSession{cfg: cfg, committer: c, store: store, release: closer(store)}, nil
}

// readState opens the document and returns a copy of it.
func readState(cmd *cobra.Command, cfgPath string) (map[string]string, error) {
	s, err := openState(cmd, cfgPath)
	if err != nil {
		return nil, err
	}
	defer s.release()
	doc, err := s.committer.Load(cmd.Context())
	if err != nil {
		return nil, &ExitError{Code: 1, Err: err}
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
		lock, err := file.LockInstance(s.cfg.State.File.Path, 0)
		if err != nil {
			return nil, &ExitError{Code: 1, Err: fmt.Errorf("%w; stop the daemon first, or pass --force", err)}
		}
		return func() { _ = lock.Release() }, nil
	}
	lease, err := newLeaseStore(ctx, s.cfg)
	if err != nil {
		return nil, err
	}
	defer closer(lease)()
	obj, err := lease.Get(ctx)
	if errors.Is(err, ports.ErrNotFound) {
		return none, nil
	}
	if err != nil {
		return nil, &ExitError{Code: 1, Err: fmt.Errorf("cannot read the lease %s to check for a running leader: %w (pass --force to write anyway)", lease, err)}
	}
	rec, err := domain.DecodeLeaseRecord(obj.Data)
	if err != nil || rec.Holder != "" {
		who := fmt.Sprintf("holder %q, epoch %d, last renewal %s", rec.Holder, rec.Epoch, rec.RenewedAt.Format("2006-01-02T15:04:05Z07:00"))
		if err != nil {
			who = "unreadable: " + err.Error()
		}
		return nil, &ExitError{Code: 1, Err: fmt.Errorf("a leader may be running: the lease %s is held (%s); stop the daemons first, or pass --force", lease, who)}
	}
	return none, nil
}

// writeErr maps a failed write to the command's exit codes.
func writeErr(err error) error {
	if errors.Is(err, domain.ErrConflict) {
		return &ExitError{Code: 1, Err: fmt.Errorf("another writer raced; retry: %w", err)}
	}
	return &ExitError{Code: 1, Err: err}
}

func newStateCommand() *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{Use: "state", Short: "Show, repair, export and import the checkpoint document"}
	cmd.PersistentFlags().StringVarP(&cfgPath, "config", "c", "", "YAML configuration file")

	var glob string
	var asJSON bool
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the checkpoints (key<TAB>value, sorted)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := readState(cmd, cfgPath)
			if err != nil {
				return err
			}
			match := globMatcher(glob)
			out := map[string]string{}
			for k, v := range doc {
				if k != domain.FenceEpochKey && match(k) {
					out[k] = v
				}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			keys := slices.Sorted(maps.Keys(out))
			for _, k := range keys {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", k, out[k])
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
			s, err := openState(cmd, cfgPath)
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
		if key == domain.FenceEpochKey && !forceReserved {
			return &ExitError{Code: 1, Err: fmt.Errorf("%s is reserved for the leader epoch; pass --force-reserved to repair it", key)}
		}
		return nil
	}
	set := write("set KEY VALUE", "Set one checkpoint (one compare-and-swap write)", cobra.ExactArgs(2),
		func(cmd *cobra.Command, s *stateSession, args []string) error {
			if err := reserved(args[0]); err != nil {
				return err
			}
			var err error
			if args[0] == domain.FenceEpochKey {
				n, perr := strconv.ParseUint(args[1], 10, 64)
				if perr != nil {
					return &ExitError{Code: 1, Err: fmt.Errorf("%s must be a non-negative integer: %w", args[0], perr)}
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
	set.Flags().BoolVar(&forceReserved, "force-reserved", false, "allow writing "+domain.FenceEpochKey)
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
	del.Flags().BoolVar(&forceReserved, "force-reserved", false, "allow deleting "+domain.FenceEpochKey)

	var includeReserved bool
	export := &cobra.Command{
		Use:   "export",
		Short: "Print the document as sorted, pretty JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := readState(cmd, cfgPath)
			if err != nil {
				return err
			}
			if !includeReserved {
				delete(doc, domain.FenceEpochKey)
			}
			return writeJSON(cmd.OutOrStdout(), doc)
		},
	}
	export.Flags().BoolVar(&includeReserved, "include-reserved", false, "include "+domain.FenceEpochKey)

	var ifEmpty bool
	imp := write("import FILE|-", "Merge the keys of a JSON object into the document (one compare-and-swap write)", cobra.ExactArgs(1),
		func(cmd *cobra.Command, s *stateSession, args []string) error {
			r := cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return &ExitError{Code: ExitInvalidConfig, Err: err}
				}
				defer f.Close()
				r = f
			}
			var raw map[string]any
			if err := json.NewDecoder(r).Decode(&raw); err != nil {
				return &ExitError{Code: ExitInvalidConfig, Err: fmt.Errorf("import: the input must be a JSON object of strings: %w", err)}
			}
			if raw == nil {
				return &ExitError{Code: ExitInvalidConfig, Err: errors.New("import: the input must be a JSON object of strings, not null")}
			}
			kv := map[string]string{}
			for k, v := range raw {
				str, ok := v.(string)
				switch {
				case k == domain.FenceEpochKey:
					return &ExitError{Code: ExitInvalidConfig, Err: fmt.Errorf("import: %s is reserved for the leader epoch", k)}
				case !ok:
					return &ExitError{Code: ExitInvalidConfig, Err: fmt.Errorf("import: the value of %q is not a string", k)}
				}
				kv[k] = str
			}
			if ifEmpty {
				doc, err := s.committer.Load(cmd.Context())
				if err != nil {
					return &ExitError{Code: 1, Err: err}
				}
				delete(doc, domain.FenceEpochKey)
				if len(doc) > 0 {
					return &ExitError{Code: 1, Err: fmt.Errorf("import --if-empty: %s already holds %d keys", s.store, len(doc))}
				}
			}
			if err := s.committer.CommitMany(cmd.Context(), kv); err != nil {
				return writeErr(err)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "imported %d keys into %s\n", len(kv), s.store)
			return err
		})
	imp.Flags().BoolVar(&ifEmpty, "if-empty", false, "refuse unless the target holds no checkpoints")

	cmd.AddCommand(show, set, del, export, imp)
	return cmd
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

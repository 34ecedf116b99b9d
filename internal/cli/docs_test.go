package cli

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// docFiles are the documents whose sf2loki commands are checked: the
// README, docs/*.md, and the READMEs under deploy/ and configs/.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md", "configs/README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		files = append(files, rel)
	}
	err = filepath.WalkDir(filepath.Join(root, "deploy"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// docCommand is an sf2loki command line a document names.
type docCommand struct {
	where string   // file:line
	text  string   // as written
	args  []string // the words after sf2loki
}

// shellFences are the fenced code blocks read as shell: those without a
// language or with a shell one (yaml, json and go blocks are not).
var shellFences = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true, "text": true}

// codeSpan is an inline code span; it may wrap a line.
var codeSpan = regexp.MustCompile("`([^`]+)`")

// loneFlag is a code span naming a flag alone (`--force`, `--key GLOB`).
var loneFlag = regexp.MustCompile(`^(--[a-z][a-z0-9-]*)(?:[ =].*)?$`)

// foreignFlags are flags of other tools the documents name in code spans.
var foreignFlags = map[string]string{"--cacert": "curl's", "--set": "helm's"}

// notCommands are code spans that start with "sf2loki " but are not
// command lines.
var notCommands = map[string]string{"sf2loki starting": "the daemon's first log line"}

// docCommands returns the sf2loki command lines of a Markdown document:
// those in shell code blocks (after a prompt, environment assignments, a
// pipe or a path such as ./bin/sf2loki) and the code spans that start with
// "sf2loki ", and the flags named alone in code spans.
func docCommands(rel, text string) (cmds []docCommand, flags []docCommand) {
	lines := strings.Split(text, "\n")
	prose := make([]string, len(lines)) // the lines outside code blocks
	fence, lang := false, ""
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			fence, lang = !fence, strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
			continue
		}
		if !fence {
			prose[i] = line
			continue
		}
		if !shellFences[lang] {
			continue
		}
		start := i
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, "\\") + " " + strings.TrimSpace(lines[i])
		}
		for _, args := range invocations(line) {
			cmds = append(cmds, docCommand{fmt.Sprintf("%s:%d", rel, start+1), strings.TrimSpace(line), args})
		}
	}
	joined := strings.Join(prose, "\n")
	for _, m := range codeSpan.FindAllStringSubmatchIndex(joined, -1) {
		span := strings.Join(strings.Fields(strings.ReplaceAll(joined[m[2]:m[3]], `\|`, "|")), " ")
		where := fmt.Sprintf("%s:%d", rel, strings.Count(joined[:m[0]], "\n")+1)
		if f := loneFlag.FindStringSubmatch(span); f != nil {
			flags = append(flags, docCommand{where, span, []string{f[1]}})
			continue
		}
		if !strings.HasPrefix(strings.TrimPrefix(span, "$ "), "sf2loki ") || notCommands[span] != "" {
			continue
		}
		if inv := invocations(span); len(inv) > 0 {
			cmds = append(cmds, docCommand{where, span, inv[0]})
		}
	}
	return cmds, flags
}

// Shell words: a redirection alone (its target is the next word) or with its
// target attached, and an environment assignment before a command.
var (
	redirection   = regexp.MustCompile(`^\d*(>>?|<)(&\d)?$`)
	redirectTo    = regexp.MustCompile(`^\d*(>>?|<)`)
	envAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// invocations splits a shell line into its commands and returns the
// arguments of each one that runs sf2loki.
func invocations(line string) [][]string {
	var out [][]string
	var seg []string
	flush := func() {
		if args, ok := sf2lokiArgs(seg); ok {
			out = append(out, args)
		}
		seg = nil
	}
	words := strings.Fields(line)
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case strings.HasPrefix(w, "#"): // a comment
			i = len(words)
		case w == "|" || w == "||" || w == "&&" || w == ";" || w == "&":
			flush()
		case strings.HasPrefix(w, "$("):
			flush()
			seg = append(seg, strings.TrimPrefix(w, "$("))
		case redirection.MatchString(w):
			i++ // its target
		case redirectTo.MatchString(w): // with its target
		default:
			end := strings.HasSuffix(w, ";") || strings.HasSuffix(w, ")")
			seg = append(seg, strings.Trim(strings.TrimRight(w, ";)"), `'"`))
			if end {
				flush()
			}
		}
	}
	flush()
	return out
}

// sf2lokiArgs returns the arguments when the command runs sf2loki.
func sf2lokiArgs(words []string) ([]string, bool) {
	for len(words) > 0 && (words[0] == "$" || envAssignment.MatchString(words[0])) {
		words = words[1:]
	}
	switch {
	case len(words) == 0:
		return nil, false
	case words[0] == "sf2loki" || strings.HasSuffix(words[0], "/sf2loki"):
		return words[1:], true
	case len(words) > 2 && words[0] == "go" && words[1] == "run" && strings.HasSuffix(words[2], "cmd/sf2loki"):
		return words[3:], true
	}
	return nil, false
}

// flagOf finds a flag of cmd by name (--name) or shorthand (-n), its own or
// inherited from a parent.
func flagOf(cmd *cobra.Command, word string) *pflag.Flag {
	name := strings.TrimLeft(word, "-")
	for _, set := range []*pflag.FlagSet{cmd.Flags(), cmd.InheritedFlags()} {
		if strings.HasPrefix(word, "--") {
			if f := set.Lookup(name); f != nil {
				return f
			}
		} else if len(name) == 1 {
			if f := set.ShorthandLookup(name); f != nil {
				return f
			}
		}
	}
	return nil
}

func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || slices.Contains(c.Aliases, name) {
			return c
		}
	}
	return nil
}

// commandUse is a command named by a document with the flags it gives it.
type commandUse struct {
	path  []string
	flags []string
}

// resolve walks the command tree along args: subcommands while they match,
// then flags (checked against the command reached) and arguments. A word
// like show|set|delete names alternatives, each resolved with the rest.
func resolve(root *cobra.Command, args []string) (uses []commandUse, problems []string) {
	cmd, positional := root, false
	var flags []string
	name := func() string { return cmd.CommandPath() }
	for i := 0; i < len(args); i++ {
		a := strings.Trim(args[i], "[]")
		if a == "" || a == "…" || a == "..." || a == "-" {
			continue
		}
		if strings.HasPrefix(a, "-") {
			word, _, hasValue := strings.Cut(a, "=")
			if word == "--help" || word == "-h" {
				flags = append(flags, "--help")
				continue
			}
			f := flagOf(cmd, word)
			if f == nil {
				problems = append(problems, fmt.Sprintf("%s has no flag %s", name(), word))
				continue
			}
			flags = append(flags, "--"+f.Name)
			if f.Value.Type() != "bool" && !hasValue {
				i++ // its value
			}
			continue
		}
		if positional {
			continue
		}
		if alts := strings.Split(a, "|"); len(alts) > 1 && !slices.ContainsFunc(alts, func(s string) bool { return subcommand(cmd, s) == nil }) {
			for _, alt := range alts {
				u, p := resolve(subcommand(cmd, alt), args[i+1:])
				for j := range u {
					u[j].flags = append(slices.Clone(flags), u[j].flags...)
				}
				uses, problems = append(uses, u...), append(problems, p...)
			}
			return uses, problems
		}
		if sub := subcommand(cmd, a); sub != nil {
			cmd = sub
			continue
		}
		if cmd.HasSubCommands() { // a group (it prints its help when run alone)
			var names []string
			for _, c := range cmd.Commands() {
				names = append(names, c.Name())
			}
			problems = append(problems, fmt.Sprintf("%s has no command %q (its commands: %s)", name(), a, strings.Join(names, ", ")))
			return nil, problems
		}
		positional = true
	}
	var path []string
	for c := cmd; c.HasParent(); c = c.Parent() {
		path = append([]string{c.Name()}, path...)
	}
	return []commandUse{{path, flags}}, problems
}

// allFlags is every flag name of every command of the tree.
func allFlags(cmd *cobra.Command, into map[string]bool) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) { into["--"+f.Name] = true })
	cmd.PersistentFlags().VisitAll(func(f *pflag.Flag) { into["--"+f.Name] = true })
	for _, c := range cmd.Commands() {
		allFlags(c, into)
	}
}

// TestDocsNameRealCommands runs `--help` of every sf2loki command that
// README.md, docs/*.md and the READMEs under deploy/ and configs/ name, in
// shell code blocks and in code spans starting with "sf2loki ", and checks
// that every flag they give it is one of its flags (listed in its help),
// and that a flag named alone in a code span (`--force`) belongs to some
// command: a document cannot name a command or a flag that does not exist.
func TestDocsNameRealCommands(t *testing.T) {
	root := testenv.RepoRoot(t)
	tree := NewRootCommand()
	known := map[string]bool{"--help": true}
	allFlags(tree, known)
	help := map[string]string{} // command path → its --help output
	seen := 0
	for _, rel := range docFiles(t, root) {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		cmds, flags := docCommands(rel, string(data))
		for _, f := range flags {
			if !known[f.args[0]] && foreignFlags[f.args[0]] == "" {
				t.Errorf("%s: `%s`: no sf2loki command has the flag %s", f.where, f.text, f.args[0])
			}
		}
		for _, c := range cmds {
			seen++
			uses, problems := resolve(tree, c.args)
			for _, p := range problems {
				t.Errorf("%s: `%s`: %s", c.where, c.text, p)
			}
			for _, u := range uses {
				key := strings.Join(u.path, " ")
				out, ok := help[key]
				if !ok {
					cmd := NewRootCommand()
					var buf bytes.Buffer
					cmd.SetOut(&buf)
					cmd.SetErr(&buf)
					cmd.SetArgs(append(slices.Clone(u.path), "--help"))
					if err := cmd.Execute(); err != nil || !strings.Contains(buf.String(), "Usage:") {
						t.Errorf("%s: `%s`: sf2loki %s --help: %v\n%s", c.where, c.text, key, err, buf.String())
					}
					out = buf.String()
					help[key] = out
				}
				for _, f := range u.flags {
					if f != "--help" && !strings.Contains(out, f+" ") {
						t.Errorf("%s: `%s`: sf2loki %s --help does not list %s", c.where, c.text, key, f)
					}
				}
			}
		}
	}
	if seen < 20 || len(help) < 8 {
		t.Fatalf("found only %d sf2loki command lines naming %d commands: is the extraction broken?", seen, len(help))
	}
	t.Logf("%d command lines, %d commands: %s", seen, len(help), strings.Join(slices.Sorted(func(yield func(string) bool) {
		for k := range help {
			if !yield(k) {
				return
			}
		}
	}), "; "))
}

// TestDocCommandsCatchWhatDoesNotExist: the extraction finds commands in
// code spans and shell blocks, and resolve reports an unknown command, an
// unknown flag, and a flag of another command.
func TestDocCommandsCatchWhatDoesNotExist(t *testing.T) {
	doc := "Run `sf2loki stat show` or `sf2loki state show --bogus`, then\n" +
		"`sf2loki\n  doctor --if-empty`; pass `--nowhere`.\n\n" +
		"```sh\nSF2LOKI_X=1 ./bin/sf2loki run --config a.yaml 2>log | sf2loki state --config b.yaml show|delete --key 'x*'\n```\n" +
		"```yaml\nsf2loki bogus: 1\n```\n"
	cmds, flags := docCommands("x.md", doc)
	if len(flags) != 1 || flags[0].args[0] != "--nowhere" || flags[0].where != "x.md:3" {
		t.Fatalf("lone flags %+v", flags)
	}
	var got []string
	for _, c := range cmds {
		uses, problems := resolve(NewRootCommand(), c.args)
		line := fmt.Sprintf("%s %v %v", c.where, uses, problems)
		got = append(got, regexp.MustCompile(` \(its commands: [^)]*\)`).ReplaceAllString(line, ""))
	}
	want := []string{
		"x.md:6 [{[run] [--config]}] []",
		"x.md:6 [{[state show] [--config --key]} {[state delete] [--config]}] [sf2loki state delete has no flag --key]",
		`x.md:1 [] [sf2loki has no command "stat"]`,
		"x.md:1 [{[state show] []}] [sf2loki state show has no flag --bogus]",
		"x.md:2 [{[doctor] []}] [sf2loki doctor has no flag --if-empty]",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

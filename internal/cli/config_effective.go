package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/sf2loki/sf2loki/internal/adapters/redact"
	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
)

func newConfigEffectiveCommand() *cobra.Command {
	var path string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "effective",
		Short: "Print the configuration as the daemon would run with it, secrets redacted",
		Long: "effective loads the configuration as run does (the file, then the defaults, the SF2LOKI_* environment\n" +
			"overrides and ${VAR} interpolation) and prints every key, durations in their shortest form. Every\n" +
			"secret that is set prints as <redacted>, and so does any value holding a secret the configuration\n" +
			"holds or points at (a *_file's content, a password in a URL). Exit 2 with every problem when the\n" +
			"configuration is invalid.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := app.LoadConfig(cmd.ErrOrStderr(), path)
			if err != nil {
				return err
			}
			doc := cfg.Document()
			redactNode(doc, redact.New(app.RedactSecrets(cfg)...))
			if asJSON {
				var b bytes.Buffer
				writeNodeJSON(&b, doc.Content[0])
				var out bytes.Buffer
				if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
					return err
				}
				out.WriteByte('\n')
				_, err := out.WriteTo(cmd.OutOrStdout())
				return err
			}
			return writeYAML(cmd.OutOrStdout(), doc)
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "YAML configuration file (environment SF2LOKI_* overrides it)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of YAML")
	return cmd
}

// redactNode replaces every secret r knows in the text values under n.
func redactNode(n *yaml.Node, r *redact.Redactor) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		n.Value = strings.ReplaceAll(r.String(n.Value), redact.Mask, config.Redacted)
	}
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 {
			continue // a key
		}
		redactNode(c, r)
	}
}

func writeYAML(w io.Writer, doc *yaml.Node) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return enc.Close()
}

// writeNodeJSON writes the value of n (a mapping, a list or a scalar of the
// document Config.Document returns) as compact JSON, keys in order.
func writeNodeJSON(b *bytes.Buffer, n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, n.Content[i].Value)
			b.WriteByte(':')
			writeNodeJSON(b, n.Content[i+1])
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			writeNodeJSON(b, c)
		}
		b.WriteByte(']')
	default:
		switch {
		case n.Tag == "!!int" || n.Tag == "!!bool" || (n.Tag == "!!float" && json.Valid([]byte(n.Value))):
			b.WriteString(n.Value)
		default:
			writeJSONString(b, n.Value) // text, and a float JSON cannot hold (.nan, .inf)
		}
	}
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b.Truncate(b.Len() - 1)
}

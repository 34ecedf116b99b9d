package cli

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
)

// DefaultHealthURL is what `sf2loki health` probes by default: the
// liveness endpoint on the default service.health_addr.
const DefaultHealthURL = "http://127.0.0.1:8080/healthz"

// newHealthCommand is the container health check for images without a
// shell or curl (Dockerfile HEALTHCHECK, ECS healthCheck): it exits 0 when
// the URL answers 200 and 1 otherwise.
func newHealthCommand() *cobra.Command {
	var (
		url     string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Probe a running sf2loki's /healthz (exit 0 when it answers 200): the container health check",
		Long: "health sends one GET to --url and exits 0 on 200, 1 otherwise. Use it as the container health\n" +
			"check where the image has no shell or curl. Probe /healthz (liveness), never /readyz: a standby\n" +
			"answers /readyz with 503 by design and must not be restarted for it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client := &http.Client{Timeout: timeout}
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodGet, url, nil)
			if err != nil {
				return &app.ExitError{Code: app.ExitUsage, Err: fmt.Errorf("health: --url %s: %w", url, err)}
			}
			req.Header.Set("User-Agent", buildinfo.UserAgent())
			resp, err := client.Do(req)
			if err != nil {
				return &app.ExitError{Code: 1, Err: fmt.Errorf("health: %s: %w (is sf2loki running, and does --url match service.health_addr?)", url, err)}
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			if resp.StatusCode != http.StatusOK {
				return &app.ExitError{Code: 1, Err: fmt.Errorf("health: %s answered %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d %s\n", url, resp.StatusCode, strings.TrimSpace(string(body)))
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", DefaultHealthURL, "the endpoint to probe")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	return cmd
}

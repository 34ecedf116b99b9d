package s3

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/smithy-go/logging"
)

// sdkLogger hands the AWS SDK's own log lines (a response without a
// checksum it can validate, IMDSv2 falling back to IMDSv1, a deprecated
// setting) to a slog logger: WARN at Warn, DEBUG at Debug, anything else
// at Info, each with component=aws-sdk. Without it the SDK prints them to
// stderr as "SDK <date> WARN ...", outside the daemon's log format and
// level.
type sdkLogger struct {
	log *slog.Logger // nil: slog.Default() at each line
	ctx context.Context
}

var _ logging.ContextLogger = sdkLogger{}

// Logf implements logging.Logger.
func (l sdkLogger) Logf(classification logging.Classification, format string, v ...any) {
	log := l.log
	if log == nil {
		log = slog.Default()
	}
	level := slog.LevelInfo
	switch classification {
	case logging.Warn:
		level = slog.LevelWarn
	case logging.Debug:
		level = slog.LevelDebug
	}
	ctx := l.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if !log.Enabled(ctx, level) {
		return
	}
	log.Log(ctx, level, fmt.Sprintf(format, v...), "component", "aws-sdk")
}

// WithContext implements logging.ContextLogger.
func (l sdkLogger) WithContext(ctx context.Context) logging.Logger {
	l.ctx = ctx
	return l
}

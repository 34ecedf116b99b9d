package app

import (
	"context"
	"log/slog"
)

// libraryLoggerKey carries, in a build's context, the logger that receives
// what the libraries log themselves.
type libraryLoggerKey struct{}

// WithLibraryLogger returns ctx carrying log for the clients built under
// it: the AWS SDK's own warnings ("Response has no supported checksum",
// "falling back to IMDSv1") then go through log, in the configured format
// and level and through the redaction of secrets, instead of to stderr as
// "SDK <date> WARN ...".
func WithLibraryLogger(ctx context.Context, log *slog.Logger) context.Context {
	return context.WithValue(ctx, libraryLoggerKey{}, log)
}

// LibraryLogger is the logger ctx carries, or nil (the adapters then use
// slog.Default()).
func LibraryLogger(ctx context.Context) *slog.Logger {
	log, _ := ctx.Value(libraryLoggerKey{}).(*slog.Logger)
	return log
}

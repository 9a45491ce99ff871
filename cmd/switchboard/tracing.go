package main

import (
	"context"
	"log/slog"

	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/tracing"
)

// startTracing installs OpenTelemetry tracing when MCP_SERVER_OTLP_ENDPOINT
// is set (and nothing otherwise). The returned func flushes the spans
// still buffered and uninstalls tracing, under its own shutdown deadline.
func startTracing(ctx context.Context, cfg config.Config, log *slog.Logger) (stop func(), err error) {
	headers, err := cfg.OTLPHeaderMap()
	if err != nil {
		return nil, err // config.Load has already refused this
	}
	shutdown, err := tracing.Setup(ctx, tracing.Config{Endpoint: cfg.OTLPEndpoint, Headers: headers,
		SampleRatio: cfg.TraceSampleRatio, Version: version, Logger: log})
	if err != nil {
		return nil, err
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("shutdown step did not finish", "step", "tracing", "err", err)
		}
	}, nil
}

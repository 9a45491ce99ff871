package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/catalog"
	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/projects"
	"github.com/switchboard-mcp/switchboard/server"
	"github.com/switchboard-mcp/switchboard/upstreams"
)

// catalogServer is the name the catalog tools (mcp-find, mcp-add,
// mcp-remove) are listed under.
const catalogServer = "mcp-catalog"

// catalogRuntime is the on-demand catalog (MCP_SERVER_CATALOG); od is nil
// when no catalog is configured.
type catalogRuntime struct {
	od *catalog.OnDemand
}

// newCatalog reads the catalog file and makes the service. A file that
// cannot be read or parsed stops the start, naming the variable.
// readCatalog reads and checks MCP_SERVER_CATALOG (nil when unset),
// before the gateway does anything else.
func readCatalog(cfg config.Config) (*catalog.Catalog, error) {
	if cfg.Hosted.Catalog == "" {
		return nil, nil
	}
	f, err := os.Open(cfg.Hosted.Catalog)
	if err != nil {
		return nil, fmt.Errorf("MCP_SERVER_CATALOG: %w", err)
	}
	defer f.Close()
	cat, err := catalog.ParseCatalog(f)
	if err != nil {
		return nil, fmt.Errorf("MCP_SERVER_CATALOG %s: %w", cfg.Hosted.Catalog, err)
	}
	return cat, nil
}

// newCatalog serves cat, the catalog readCatalog read (nil: none).
func newCatalog(ctx context.Context, cfg config.Config, cat *catalog.Catalog, log *slog.Logger, eng *engine.Engine, hub func() *projects.Hub) (*catalogRuntime, error) {
	if cat == nil {
		return &catalogRuntime{}, nil
	}
	if eng != nil {
		cat.Refuse(eng.CheckImage) // MCP_SERVER_IMAGE_ALLOW, MCP_SERVER_IMAGE_REQUIRE_DIGEST
	}
	for _, w := range cat.Warnings {
		log.Warn(w, "catalog", cfg.Hosted.Catalog)
	}
	opts := catalog.OnDemandOptions{
		Catalog: cat, PullPolicy: engine.PullPolicy(cfg.Images.PullPolicy), WarmPool: cfg.Hosted.CatalogWarmPool, WarmPoolMax: cfg.Hosted.CatalogWarmPoolMax, WarmPoolIdle: cfg.Hosted.CatalogWarmPoolIdle, MaxContainers: cfg.Hosted.CatalogMaxContainers, IdleTimeout: cfg.Hosted.CatalogIdle,
		Version: version, CallTimeout: cfg.CallTimeout, MaxMessageBytes: cfg.MaxMessageBytes, ConnectTimeout: cfg.ConnectTimeout, StopTimeout: cfg.Hosted.StopTimeout,
		Secrets: func(ctx context.Context, p string) (map[string]string, error) { return hub().SecretValues(ctx, p) },
		Notify:  func(p, s string) { hub().SessionToolsChanged(p, s) },
		ProjectCatalog: func(ctx context.Context, p string) *switchboard.Catalog {
			m, err := hub().Manager(ctx, p)
			if err != nil {
				return nil
			}
			return m.Tools(ctx) // connects the project's servers never tried
		},
		Logger: log.With("component", "catalog"),
	}
	if !cfg.Hosted.Enabled {
		opts.EngineErr = switchboard.Errorf(switchboard.ErrConfig, "containers are switched off (MCP_SERVER_HOSTED=false)")
	} else {
		opts.Engine = eng
	}
	od := catalog.NewOnDemand(opts)
	log.Info("catalog loaded", "file", cfg.Hosted.Catalog, "servers", len(cat.Entries), "skipped", len(cat.Warnings))
	return &catalogRuntime{od: od}, nil
}

// builtins adds the catalog tools to a project's built-in servers.
func (c *catalogRuntime) builtins(project string, into map[string]upstreams.Builtin) map[string]upstreams.Builtin {
	if c.od == nil {
		return into
	}
	if into == nil {
		into = map[string]upstreams.Builtin{}
	}
	into[catalogServer] = c.od.ProjectTools(project)
	return into
}

// sessionTools is projects.Options.SessionTools; nil without a catalog.
func (c *catalogRuntime) sessionTools() func(project string) server.SessionTools {
	if c.od == nil {
		return nil
	}
	return func(project string) server.SessionTools { return c.od.SessionTools(project) }
}

// sessionEnded removes the containers of a session that ended.
func (c *catalogRuntime) sessionEnded(project, session string) {
	if c.od != nil {
		c.od.SessionEnded(project, session)
	}
}

// status adds the "catalog" section to the status JSON.
func (c *catalogRuntime) status(into map[string]any) map[string]any {
	if c.od == nil {
		return into
	}
	if into == nil {
		into = map[string]any{}
	}
	into["catalog"] = c.od.Status()
	return into
}

// Close removes every catalog container.
func (c *catalogRuntime) Close(ctx context.Context) error {
	if c.od == nil {
		return nil
	}
	return c.od.Close(ctx)
}

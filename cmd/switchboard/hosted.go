package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/hosted"
	"github.com/switchboard-mcp/switchboard/lease"
	"github.com/switchboard-mcp/switchboard/projects"
	"github.com/switchboard-mcp/switchboard/secrets"
)

// hostedRuntime is the hosted-server service, closed after the hub.
type hostedRuntime struct {
	svc *hosted.Service
}

// Close stops every hosted container (SIGTERM, then SIGKILL).
func (h *hostedRuntime) Close(ctx context.Context) error { return h.svc.Close(ctx) }

// instanceName names this gateway on the Docker engine, for hosted servers
// and the sandbox alike: MCP_SERVER_INSTANCE, or "sb-" and the id its
// store keeps. A new store makes a random id once, so a restart finds its
// own containers, replicas sharing a database share them, and gateways
// with different stores never touch each other's, even where the stores
// look alike (two compose projects on postgres:5432/switchboard, two
// images on /data). A store that served before the id existed keeps the
// name derived from where it is (derivedInstanceName), so it still finds
// the containers and workspaces it made under that name.
func instanceName(ctx context.Context, cfg config.Config, st switchboard.Store) (string, error) {
	if cfg.Hosted.Instance != "" {
		return cfg.Hosted.Instance, nil
	}
	id, err := storeIdentity(ctx, cfg, st)
	if err != nil || id == "" {
		return derivedInstanceName(cfg), err
	}
	return "sb-" + id, nil
}

// storeIdentity is the id the store keeps, made once for it: the
// identity every object the gateway makes on the engine carries
// (engine.LabelStore), and the only objects it adopts or removes. It is
// read whether or not MCP_SERVER_INSTANCE names the instance, so two
// gateways given one instance name on two stores still tell their
// objects apart (issue 33). A store that served before the id existed
// keeps the hash of where it is, as the derived instance name (so
// unsetting MCP_SERVER_INSTANCE later still finds that name's objects).
// "" for a store that keeps none.
func storeIdentity(ctx context.Context, cfg config.Config, st switchboard.Store) (string, error) {
	ids, ok := st.(interface {
		InstanceID(ctx context.Context, fallback string) (string, error)
	})
	if !ok {
		return "", nil
	}
	where := cfg
	where.Hosted.Instance = ""
	id, err := ids.InstanceID(ctx, strings.TrimPrefix(derivedInstanceName(where), "sb-"))
	if err != nil {
		return "", fmt.Errorf("reading the gateway's instance id: %w", err)
	}
	return id, nil
}

// derivedInstanceName is MCP_SERVER_INSTANCE or a hash of where the store
// is (the data dir's absolute path, or the database's host and name): the
// instance name of gateways before their store kept one, and of commands
// that open no store.
func derivedInstanceName(cfg config.Config) string {
	if cfg.Hosted.Instance != "" {
		return cfg.Hosted.Instance
	}
	key := "db:" + cfg.StoreDescription()
	if cfg.DatabaseURL == "" {
		dir, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			dir = cfg.DataDir
		}
		key = "dir:" + dir
	}
	sum := sha256.Sum256([]byte(key))
	return "sb-" + hex.EncodeToString(sum[:6])
}

// newHosted makes the hosted-server service on eng, the gateway's one
// engine client. An engine that does not answer is a warning: the gateway
// serves everything else and each hosted server reports why it waits.
// hub is read when the service first needs it, after it is built.
func newHosted(ctx context.Context, cfg config.Config, log *slog.Logger, st switchboard.Store, eng *engine.Engine, box hosted.Sealer, repl *hosted.Replication, hub func() *projects.Hub) *hostedRuntime {
	mgr := func(p string) (hosted.Upstreams, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return hub().Manager(ctx, p)
	}
	opts := hosted.Options{
		Store:     st,
		Box:       box,
		Upstreams: mgr,
		Secrets:   func(ctx context.Context, p string) (map[string]string, error) { return hub().SecretValues(ctx, p) },
		NameTaken: func(ctx context.Context, p, name string) bool { return hub().NameTaken(ctx, p, name) },
		Changed:   func(ctx context.Context, p string) { hub().HostedChanged(ctx, p) },
		Timing: hosted.Timing{
			RestartDelay: cfg.Hosted.RestartDelay, CrashWindow: cfg.Hosted.CrashWindow, CrashLimit: cfg.Hosted.CrashLimit,
			Backoff: cfg.Hosted.Backoff, StopTimeout: cfg.Hosted.StopTimeout, ShutdownTimeout: cfg.Hosted.ShutdownTimeout,
			Heartbeat: cfg.Hosted.Heartbeat, PingTimeout: cfg.Hosted.PingTimeout, ConnectTimeout: cfg.ConnectTimeout,
		},
		PullPolicy:  engine.PullPolicy(cfg.Images.PullPolicy),
		Replication: repl,
		Logger:      log,
	}
	if !cfg.Hosted.Enabled {
		opts.EngineErr = fmt.Errorf("hosted servers are switched off (MCP_SERVER_HOSTED=false)")
	} else {
		opts.Engine = eng
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if err := eng.Ping(pctx); err != nil {
			log.Warn("Docker engine not reachable; hosted servers wait for it and report why in their status", "err", err)
		}
		cancel()
	}
	return &hostedRuntime{svc: hosted.New(opts)}
}

// replication shares hosted servers with the replicas on the same store:
// one owner per server (the lease "hosted/<row id>", MCP_SERVER_OWNER_LEASE
// long), reconciled every MCP_SERVER_REPLICA_TICK; the others reach it at
// its MCP_SERVER_REPLICA_URL through the internal endpoint, with a token
// derived from the shared secret key.
func replication(cfg config.Config, st switchboard.Store, proc *lease.Process, key secrets.Key, listen string) *hosted.Replication {
	self := "http://" + listen
	if host, port, err := net.SplitHostPort(listen); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			self = "http://" + net.JoinHostPort("127.0.0.1", port)
		}
	}
	return &hosted.Replication{Leases: st, Owner: proc.ID(), URL: cfg.ReplicaBase(listen), Self: self,
		Token: key.ReplicaToken(), TTL: cfg.OwnerLease, Tick: cfg.ReplicaTick, Alive: proc.Alive}
}

// startHosted starts the registered hosted servers and those of the
// servers file, in the background of a serving gateway: nothing here
// waits for a container.
func startHosted(ctx context.Context, log *slog.Logger, hr *hostedRuntime, file []switchboard.HostedRegistration) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := hr.svc.Start(ctx); err != nil {
		log.Error("hosted servers not started", "err", err)
		return
	}
	if err := hr.svc.SetFile(ctx, "default", file); err != nil {
		log.Error("hosted servers of the servers file", "err", err)
	}
}

// imageRules are the engine's image rules from the configuration.
func imageRules(cfg config.Config) engine.ImageRules {
	return engine.ImageRules{Allow: cfg.Images.Allow, RequireDigest: cfg.Images.RequireDigest,
		Timeout: cfg.Images.PullTimeout, StallTimeout: cfg.Images.PullStallTimeout}
}

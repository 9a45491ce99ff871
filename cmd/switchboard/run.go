package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/calllog"
	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/console"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/hosted"
	"github.com/switchboard-mcp/switchboard/lease"
	"github.com/switchboard-mcp/switchboard/metrics"
	"github.com/switchboard-mcp/switchboard/projects"
	"github.com/switchboard-mcp/switchboard/sandbox"
	"github.com/switchboard-mcp/switchboard/secrets"
	"github.com/switchboard-mcp/switchboard/server"
	"github.com/switchboard-mcp/switchboard/server/api"
	"github.com/switchboard-mcp/switchboard/store/postgres"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
	"github.com/switchboard-mcp/switchboard/upstreams"
)

// runOptions is what run takes beyond its arguments; ctx only cancels.
type runOptions struct {
	Reload    <-chan os.Signal  // each value re-reads the servers file (main: SIGHUP); nil never
	Listening func(addr string) // if set, told the bound address once serving (tests on port 0)
	// Started, if set, is called once every step has started and the
	// gateway serves; an error fails the start there, as the last step
	// (tests of the unwinding).
	Started func(addr string) error
}

// run is runWith with no reload channel and no listening callback.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return runWith(ctx, runOptions{}, args, getenv, stdout, stderr)
}

// runWith parses flags and environment and runs a command, or the
// gateway: started step by step, served until ctx ends, then stopped by
// undoing the steps, last first (undoStack).
func runWith(ctx context.Context, opts runOptions, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("switchboard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *showVersion {
		fmt.Fprintln(stdout, "switchboard", version)
		return nil
	}
	if fs.NArg() > 0 {
		switch fs.Arg(0) {
		case "demo-server":
			return serveDemo(ctx, os.Stdin, stdout)
		case "healthcheck":
			return healthcheck(ctx, getenv)
		case "sandbox":
			return runSandbox(ctx, fs.Args()[1:], getenv, stdout, stderr)
		case "projects", "servers", "tools", "call", "secrets", "tokens", "history", "reload", "hosted", "workspaces":
			return runCLI(ctx, fs.Args(), getenv, os.Stdin, stdout, stderr)
		default:
			return fmt.Errorf("unknown command %q; run switchboard -h", fs.Arg(0))
		}
	}

	cfg, err := config.Load(getenv)
	if err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	log := newLogger(cfg, stderr)
	log.Info("starting switchboard", append([]any{"version", version}, cfg.LogAttrs()...)...)
	undo := &undoStack{log: log, timeout: cfg.ShutdownTimeout}
	defer undo.unwind() // a failed start: undo what had started

	stopTracing, err := startTracing(ctx, cfg, log)
	if err != nil {
		return err
	}
	undo.push("tracing", func(context.Context) error { stopTracing(); return nil }) // last: no span is lost

	// Everything the gateway was given is read and checked before any
	// side effect, every problem reported at once: the servers file (read
	// once, both kinds of entry) and the catalog.
	file, ferr := loadServersFile(cfg, getenv)
	cat0, cerr := readCatalog(cfg)
	if err := errors.Join(ferr, cerr); err != nil {
		return err
	}
	specs, fileHosted := file.Specs, file.Hosted
	// Listen synchronously, before anything starts: a bind error is
	// returned, not logged later, and a gateway that cannot serve starts
	// no container and no child.
	ln, err := net.Listen("tcp", cfg.Addr())
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another process using the port? set MCP_SERVER_PORT)", cfg.Addr(), err)
	}
	undo.push("listener", func(context.Context) error { _ = ln.Close(); return nil }) // once served, closed already
	for _, s := range specs {
		if s.Err != nil {
			log.Error("server not started", "server", s.Name, "err", s.Err)
		}
	}

	if err := restrictDataDir(cfg.DataDir, log); err != nil {
		return err
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	undo.push("store", func(context.Context) error { return st.Close() })
	key, err := secrets.LoadKey(cfg.SecretKey, cfg.DataDir)
	if err != nil {
		return err
	}
	for _, w := range key.Warnings {
		log.Warn(w, "key", key)
	}
	if key.Generated && cfg.DatabaseURL != "" {
		log.Warn("replicas sharing one database need the same key: set MCP_SERVER_SECRET_KEY on every replica", "key", key)
	}
	box, err := secrets.NewBox(key.Bytes)
	if err == nil {
		err = checkKey(ctx, st, box, key)
	}
	if err != nil {
		return err
	}
	inst, err := instanceName(ctx, cfg, st)
	if err != nil {
		return err
	}
	storeID, err := storeIdentity(ctx, cfg, st)
	if err != nil {
		return err
	}
	proc, err := lease.Start(ctx, st, lease.Options{TTL: cfg.OwnerLease, Logger: log})
	if err != nil {
		return err
	}
	undo.push("lease", proc.Close) // after every container of this process is gone
	// One Docker engine client for hosted servers and the sandbox: no I/O
	// until they use it; closed after both stopped.
	diskDir, _ := filepath.Abs(filepath.Join(cfg.DataDir, "disks"))
	eng, err := engine.New(engine.Options{Host: cfg.DockerHost, Instance: inst, Store: storeID, Owner: proc.ID(), DiskDir: diskDir, Logger: log,
		Runtime: cfg.Hosted.ContainerRuntime, ProbeImage: cfg.Sandbox.ImagePython})
	if err != nil {
		return fmt.Errorf("DOCKER_HOST: %w", err)
	}
	eng.SetImageRules(imageRules(cfg))
	undo.push("engine client", func(context.Context) error { return eng.Close() })
	undo.push("container sweep", eng.StartSweeper(ctx, proc.Alive, proc.TTL()).Close)
	observers := observeAll{}
	if cfg.CallLog {
		spoolDir := filepath.Join(cfg.DataDir, "calllog")
		recoverSpool(ctx, log, st, spoolDir)
		calls := calllog.New(st, calllog.Options{Logger: log, SpoolDir: spoolDir})
		undo.push("call log", calls.Close) // flushed after every call has ended
		observers = append(observers, calls)
	}
	sbox := startSandbox(ctx, cfg, st, eng, proc.Alive, log)
	// The sessions' leases (set once the replica's URL is known) go after
	// the sessions ended.
	var homes *sandbox.Homes
	undo.push("sandbox session leases", func(ctx context.Context) error {
		if homes == nil {
			return nil
		}
		return homes.Close(ctx)
	})
	undo.push("sandbox sessions", sbox.close) // containers removed; workspaces kept
	// A fresh hop id per process: a request that comes back carrying it
	// was sent by this gateway to itself (an upstream pointing at /mcp).
	var hopBytes [8]byte
	_, _ = rand.Read(hopBytes[:])
	hop := hex.EncodeToString(hopBytes[:])
	met := metrics.New()
	observers = append(observers, met)
	var hub *projects.Hub
	cat, err := newCatalog(ctx, cfg, cat0, log, eng, func() *projects.Hub { return hub })
	if err != nil {
		return err
	}
	undo.push("catalog containers", cat.Close) // the sessions they served ended with the hub
	repl := replication(cfg, st, proc, key, ln.Addr().String())
	homes = sandbox.NewHomes(sbox.svc, repl)
	homes.Start()
	sbox.setHomes(homes)
	hr := newHosted(ctx, cfg, log, st, eng, box, repl, func() *projects.Hub { return hub })
	undo.push("hosted servers", hr.Close)
	met.Hosted(hr.svc.All)
	hub = projects.New(projects.Options{
		Store: st, Box: box, AdminToken: cfg.AdminToken, Auth: cfg.Auth, Getenv: getenv, SyncInterval: cfg.SyncInterval, Logger: log,
		OnState: met.SetState,
		OnRemoved: func(project, server string) {
			met.Forget(project, server)
			if server == "" {
				hr.svc.ProjectGone(project) // its rows went with it
			}
		},
		HostedSpecs: hr.svc.Specs, HostedStatus: hr.svc.Brief, Streams: hr.svc.Opener,
		Builtins: func(p string) map[string]upstreams.Builtin { return cat.builtins(p, sbox.builtins(p)) },
		OnSessionEnd: func(p, s string) {
			sbox.svc.SessionEnded(p, s)
			cat.sessionEnded(p, s)
		},
		SessionTools: cat.sessionTools(),
		Upstreams: upstreams.Options{
			Version: version, CallTimeout: cfg.CallTimeout, ConnectTimeout: cfg.ConnectTimeout, ListWait: cfg.ListWait,
			StopTimeout: cfg.StopTimeout, BreakerFailures: cfg.BreakerFailures, BreakerCooldown: cfg.BreakerCooldown,
			ListDebounce: cfg.ListDebounce, MaxMessageBytes: cfg.MaxMessageBytes, HopID: hop,
		},
		Edge: server.Options{
			Version: version, CORS: cfg.EnableCORS, CORSOrigins: cfg.CORSOrigins, MaxBodyBytes: cfg.MaxBodyBytes,
			SessionIdleTTL: cfg.SessionIdleTTL, MaxSessions: cfg.MaxSessions, MaxProjectSessions: cfg.MaxProjectSessions, Heartbeat: cfg.Heartbeat,
			Observer: observers, Metrics: met.Handler(), HopID: hop,
			StatusSections: func(ctx context.Context, project string) map[string]any {
				m := cat.status(sbox.status(ctx))
				m["pulls"] = eng.Pulls(project)
				return m
			},
		},
	})
	undo.push("projects", hub.Close) // upstream children
	sbox.setHub(hub)
	met.Sessions(hub.Sessions)
	if err := hub.Start(ctx, specs); err != nil {
		return fmt.Errorf("loading projects from the store (%s): %w", cfg.StoreDescription(), err)
	}
	startHosted(ctx, log, hr, fileHosted)
	// One reload at a time, whether SIGHUP or POST /api/v1/reload asked.
	var reloadMu sync.Mutex
	reloadFile := func(ctx context.Context) (int, error) {
		reloadMu.Lock()
		defer reloadMu.Unlock()
		// One read: both kinds of entry come from the same file contents,
		// and a file with any problem changes nothing.
		f, err := loadServersFile(cfg, getenv)
		if err != nil {
			log.Error("reload failed; keeping the current servers", "err", err)
			return 0, switchboard.Errorf(switchboard.ErrInvalid, "the servers file was not reloaded; the current servers stay: %v", err)
		}
		if err := hub.SetFile(ctx, f.Specs); err != nil {
			log.Warn("servers file read, but the default project could not be reloaded from the store; the periodic sync will retry", "err", err)
		}
		if err := hr.svc.SetFile(ctx, "default", f.Hosted); err != nil {
			log.Error("hosted servers of the servers file", "err", err)
		}
		log.Info("reloaded servers file", "servers", len(f.Specs))
		return len(f.Specs), nil
	}
	aopts := api.Options{Store: st, Projects: hub, Access: hub, Secrets: box, NewToken: secrets.NewToken,
		TokensChanged: hub.TokensChanged, MaxBodyBytes: cfg.MaxBodyBytes, Logger: log, Hosted: hr.svc, Sandbox: sbox, Pulls: eng.Pulls,
		Teardown: &engine.Teardown{Engine: eng, Holders: projectHolders(sbox, hr, cat), Settle: max(3*cfg.SyncInterval, 30*time.Second)}}
	if cfg.ServersFile != "" {
		aopts.Reload = reloadFile
	}
	admin := api.New(aopts)

	// The console calls the API and the MCP endpoints through the very
	// handler that serves it, so it is bound once that handler exists.
	ui := console.New(console.Options{Version: version, Logger: log})
	root := hub.Handler(admin, ui)
	ui.Bind(root)
	// Replicas' calls to each other, on the same listener.
	mux := http.NewServeMux()
	mux.Handle(hosted.InternalPrefix, hr.svc.Internal())
	mux.Handle(sandbox.CallPath, homes.Handler())
	mux.Handle("/", root)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	if cfg.PprofAddr != "" {
		stop, err := servePprof(log, cfg.PprofAddr)
		if err != nil {
			return err
		}
		undo.push("pprof", func(context.Context) error { stop(); return nil })
	}
	log.Info("listening", "addr", ln.Addr().String(), "replica_url", repl.URL, "mcp", "http://"+ln.Addr().String()+"/mcp", "servers", len(specs), "pid", os.Getpid())
	if opts.Listening != nil {
		opts.Listening(ln.Addr().String())
	}
	serveErr := make(chan error, 1) // Serve returns once srv shuts down
	go func() { serveErr <- srv.Serve(ln) }()
	undo.push("http", func(ctx context.Context) error {
		hr.svc.Drain(ctx) // other replicas' hops wait for the next owner from now on; those relayed here get their answers first
		// Both at once: srv.Shutdown stops accepting and waits for requests
		// in flight; the hub lets legacy calls send their answers, then
		// ends the client streams that srv.Shutdown would wait on forever.
		var edges sync.WaitGroup
		edges.Go(func() {
			if err := hub.Shutdown(ctx); err != nil {
				log.Warn("client sessions cut off at the shutdown timeout", "err", err)
			}
		})
		if err := srv.Shutdown(ctx); err != nil {
			log.Warn("in-flight requests cut off at the shutdown timeout", "err", err)
			_ = srv.Close()
		}
		edges.Wait()
		return nil
	})
	if opts.Started != nil {
		if err := opts.Started(ln.Addr().String()); err != nil {
			return err
		}
	}

	for {
		select {
		case err := <-serveErr:
			return fmt.Errorf("serve: %w", err)
		case <-opts.Reload:
			_, _ = reloadFile(ctx) // logged inside
			continue
		case <-ctx.Done():
		}
		break
	}
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	undo.unwind()
	log.Info("stopped")
	return nil
}

// undoStack is how run cleans up, even after a partial start (caddy's
// model): each start step that succeeds pushes its undo, and a failed
// start and a shutdown both unwind it, last first. That is the shutdown
// order: stop accepting and close client streams, stop upstream, hosted,
// catalog and sandbox containers, flush the call log, stop sweeping,
// release the lease, close the store, and stop tracing so no span is lost.
type undoStack struct {
	log     *slog.Logger
	timeout time.Duration // of each step
	steps   []func()
}

// push adds the undo of a step that succeeded, named if it fails.
func (u *undoStack) push(name string, fn func(context.Context) error) {
	u.steps = append(u.steps, func() {
		ctx, cancel := context.WithTimeout(context.Background(), u.timeout)
		defer cancel()
		if err := fn(ctx); err != nil {
			u.log.Warn("shutdown step did not finish", "step", name, "err", err)
		}
	})
}

// unwind undoes every step pushed, last first, each under its own
// deadline (run's ctx is cancelled by then); unwinding again does nothing.
func (u *undoStack) unwind() {
	for len(u.steps) > 0 {
		last := u.steps[len(u.steps)-1]
		u.steps = u.steps[:len(u.steps)-1]
		last()
	}
}

// spoolReplayTimeout bounds replaying dead processes' spools at start.
const spoolReplayTimeout = 30 * time.Second

// recoverSpool stores the tool calls that dead processes (this one's
// predecessor, or a replica sharing the data dir) answered but had not
// stored yet. It runs before serving; a failure is a warning, and the
// files wait for the next start.
func recoverSpool(ctx context.Context, log *slog.Logger, st switchboard.Store, dir string) {
	ctx, cancel := context.WithTimeout(ctx, spoolReplayTimeout)
	defer cancel()
	done, err := calllog.Recover(ctx, st, dir)
	if done.Files > 0 || done.Skipped > 0 {
		log.Info("tool-call records replayed from the spool of a process that died", "files", done.Files, "records", done.Records, "skipped_lines", done.Skipped)
	}
	if err != nil {
		log.Warn("tool-call spool not fully replayed; the rest is kept for the next start", "dir", dir, "err", err)
	}
}

// restrictDataDir creates the data directory owner-only, or makes an
// existing one so, as the database files and the key file are: it holds
// the key, the database and the call log's spool, and a directory others
// can list or enter shows them what is there and when it changes. Errors:
// ErrConfig when it cannot be created or restricted.
func restrictDataDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return switchboard.Errorf(switchboard.ErrConfig, "data directory: %v", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return switchboard.Errorf(switchboard.ErrConfig, "data directory: %v", err)
	}
	// A sticky directory (/tmp) is shared by design: taking it over
	// would break everyone else's use of it.
	if fi.Mode()&os.ModeSticky != 0 {
		return switchboard.Errorf(switchboard.ErrConfig, "data directory %s is a shared directory (sticky bit set); set MCP_SERVER_DATA_DIR to a directory of the gateway's own", dir)
	}
	// Windows reports a synthetic mode that Chmod cannot change.
	if mode := fi.Mode().Perm(); mode&0o077 != 0 && runtime.GOOS != "windows" {
		if err := os.Chmod(dir, mode&^0o077); err != nil {
			return switchboard.Errorf(switchboard.ErrConfig, "data directory %s is accessible to group or others (mode %04o) and cannot be restricted: %v; run chmod 700 on it as its owner", dir, mode, errors.Unwrap(err))
		}
		log.Warn("data directory was accessible to group or others; restricted it to its owner", "dir", dir, "was", fmt.Sprintf("%04o", mode), "now", fmt.Sprintf("%04o", mode&^0o077))
	}
	return nil
}

// openStore opens PostgreSQL when MCP_SERVER_DATABASE_URL is set, else the
// embedded store in the data dir, and makes sure the default project
// exists.
func openStore(ctx context.Context, cfg config.Config) (switchboard.Store, error) {
	var st switchboard.Store
	var err error
	if cfg.DatabaseURL != "" {
		st, err = postgres.Open(ctx, cfg.DatabaseURL)
	} else {
		st, err = sqlite.Open(ctx, cfg.DataDir)
	}
	if err != nil {
		return nil, fmt.Errorf("store (%s): %w", cfg.StoreDescription(), err)
	}
	if _, err := st.CreateProject(ctx, switchboard.Project{ID: "default", Description: defaultDescription}); err != nil && !errors.Is(err, switchboard.ErrConflict) {
		_ = st.Close()
		return nil, fmt.Errorf("store (%s): creating the default project: %w", cfg.StoreDescription(), err)
	}
	// Earlier versions described it by the servers file alone, which was
	// wrong without one; a description the user set is left alone.
	if p, err := st.GetProject(ctx, "default"); err == nil && p.Description == "servers from MCP_SERVER_CONFIG" {
		p.Description = defaultDescription
		_, _ = st.UpdateProject(ctx, p)
	}
	return st, nil
}

// defaultDescription describes the default project however it is fed.
const defaultDescription = "the gateway's own project (/mcp): the servers file or built-in demo, then its stored servers"

// checkKey refuses a key under which not one stored secret decrypts while
// some were sealed under another key: a replica started without the
// shared MCP_SERVER_SECRET_KEY (it generated its own) would otherwise
// serve every server that needs a secret as "missing variable". It reads
// until the first secret that opens.
func checkKey(ctx context.Context, st switchboard.Store, box *secrets.Box, key secrets.Key) error {
	projects, err := st.ListProjects(ctx)
	if err != nil {
		return fmt.Errorf("checking the secret key against the store: %w", err)
	}
	wrong := 0
	for _, p := range projects {
		list, err := st.ListSecrets(ctx, p.ID)
		if err != nil {
			return fmt.Errorf("checking the secret key against the store: %w", err)
		}
		for _, sec := range list {
			_, err := box.Open(p.ID, sec.Name, sec.Ciphertext)
			switch {
			case err == nil:
				return nil
			case errors.Is(err, secrets.ErrWrongKey):
				wrong++
			}
		}
	}
	if wrong > 0 {
		return fmt.Errorf("MCP_SERVER_SECRET_KEY: none of the %d stored secrets decrypts with the %s; they were sealed with another key. "+
			"Start with the key the store was used with (every replica sharing a database needs the same MCP_SERVER_SECRET_KEY)", wrong, key)
	}
	return nil
}

// observeAll fans a tool call out to every observer.
type observeAll []server.Observer

func (o observeAll) ObserveCall(rec switchboard.ToolCallRecord) {
	for _, x := range o {
		x.ObserveCall(rec)
	}
}

// ObserveFeature fans a prompt get or resource read out to the observers
// that record them (server.FeatureObserver).
func (o observeAll) ObserveFeature(rec switchboard.ToolCallRecord, kind string) {
	for _, x := range o {
		if f, ok := x.(server.FeatureObserver); ok {
			f.ObserveFeature(rec, kind)
		}
	}
}

// loadSpecs reads the servers file, or configures the built-in demo
// server when there is none, so a bare start serves real tools.
// loadServersFile reads the servers file once: the servers to connect to
// (the built-in demo when there is no file) and those to run in
// containers, each hosted entry validated; every problem at once.
func loadServersFile(cfg config.Config, getenv func(string) string) (config.ServersFile, error) {
	if cfg.ServersFile == "" {
		exe, err := os.Executable()
		if err != nil {
			return config.ServersFile{}, nil
		}
		return config.ServersFile{Specs: []switchboard.ServerSpec{{Name: "demo", Transport: switchboard.TransportStdio, Command: exe, Args: []string{"demo-server"}}}}, nil
	}
	f, err := config.ReadServersFile(cfg.ServersFile, getenv)
	if err != nil {
		return f, err
	}
	var errs []error
	for _, r := range f.Hosted {
		if _, err := hosted.Validate(r); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return config.ServersFile{}, fmt.Errorf("MCP_SERVER_CONFIG %s: %w", cfg.ServersFile, errors.Join(errs...))
	}
	return f, nil
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	level, _ := config.ParseLevel(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

const usage = `switchboard: one MCP endpoint in front of all your MCP servers.

Usage:
  switchboard              run the gateway (configured by MCP_SERVER_* variables)
  switchboard demo-server  run the built-in demo MCP server on stdio
  switchboard healthcheck  exit 0 if the gateway on MCP_SERVER_HOST:PORT answers /healthz
  switchboard sandbox build-image  build the sandbox image from Debian packages (see -h)
  switchboard -version     print the version

Manage a running gateway over its admin API (flags go after the command):
  switchboard projects ls | add ID [--description D] | rm [--force] ID
  switchboard servers ls | add NAME (--command CMD [--arg A]... [--env K=V]... [--cwd DIR]
                                     | --url URL [--transport T] [--header K=V]... | --config JSON)
                       | rm NAME | enable NAME | disable NAME
  switchboard tools ls
  switchboard call TOOL [JSON-ARGS]   call a tool through the project's MCP endpoint
  switchboard secrets ls | set NAME [VALUE] (VALUE from stdin when omitted) | rm NAME
  switchboard tokens ls | create NAME | revoke ID
  switchboard workspaces ls | show ID | attach ID --agent NAME | detach [--force] ID
                       | snapshot [--force] ID | restore SNAPSHOT | rm [--force] ID
  switchboard sandbox enable | disable   (the project's sandbox tools)
  switchboard history [--server S] [--tool T] [--outcome O] [--since T] [--limit N]
  switchboard reload                  re-read the servers file (admin), as SIGHUP does
  switchboard hosted ls | add NAME --image IMAGE [...] | show NAME | restart NAME | logs NAME | rm NAME
                                      MCP servers the gateway runs in Docker containers
Every command takes --url (env SWITCHBOARD_URL, default http://127.0.0.1:8080; --gateway in
servers add), -p/--project (env SWITCHBOARD_PROJECT, default "default"), --token (env
SWITCHBOARD_TOKEN), --json and --timeout (default 30s); -h shows a command's flags.

With no MCP_SERVER_CONFIG the gateway serves the built-in demo server.
Send SIGHUP (the pid is in the start log) or run "switchboard reload" to reload the servers file. See docs/configuration.md for every variable.
`

// healthcheck asks a running gateway's /healthz; for images without curl.
func healthcheck(ctx context.Context, getenv func(string) string) error {
	cfg, err := config.Load(getenv)
	if err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	host := cfg.Host
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, fmt.Sprint(cfg.Port))+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: /healthz answered %s", resp.Status)
	}
	return nil
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/sandbox"
)

const sandboxUsage = `Usage:
  switchboard sandbox enable | disable   serve the project's sandbox tools, or not (admin API)
  switchboard sandbox build-image [--cache-dir DIR] [--no-latest] [--push REGISTRY]
      assemble the sandbox image (python3, node, sh/bash, coreutils, ps) from Debian's
      packages with apt-get and dpkg-deb, import it into the Docker engine
      (DOCKER_HOST) as switchboard-sandbox:<content hash>, and point
      switchboard-sandbox:latest (the default MCP_SERVER_SANDBOX_IMAGE_PYTHON
      and _NODE) at it. An image already present is reused. --push REGISTRY
      (host:port[/path]) also pushes it there as REGISTRY/switchboard-sandbox:<hash>
      (credentials: SWITCHBOARD_REGISTRY_USER and SWITCHBOARD_REGISTRY_PASSWORD),
      and prints the name other gateways set MCP_SERVER_SANDBOX_IMAGE_* to: they pull it.
`

// runSandbox runs the local `switchboard sandbox ...` commands: they talk
// to the Docker engine, not to a running gateway.
func runSandbox(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fmt.Fprint(stdout, sandboxUsage)
		if len(args) == 0 {
			return errors.New("sandbox: missing subcommand")
		}
		return nil
	}
	if args[0] == "enable" || args[0] == "disable" {
		return runCLI(ctx, append([]string{"sandbox"}, args...), getenv, os.Stdin, stdout, stderr)
	}
	if args[0] != "build-image" {
		fmt.Fprint(stderr, sandboxUsage)
		return fmt.Errorf("sandbox: unknown subcommand %q", args[0])
	}
	fs := flag.NewFlagSet("sandbox build-image", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // -h prints the usage below, a bad flag says which

	cacheDir := fs.String("cache-dir", "", "where downloaded .deb files are kept (default: the user cache directory)")
	noLatest := fs.Bool("no-latest", false, "do not move switchboard-sandbox:latest to the new image")
	push := fs.String("push", "", "also push the image to `REGISTRY` (host:port[/path])")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, sandboxUsage)
			return nil
		}
		return fmt.Errorf("sandbox build-image: %v; run switchboard sandbox build-image -h", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sandbox build-image: unexpected argument %q; run switchboard sandbox build-image -h", fs.Arg(0))
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	e, err := engine.New(engine.Options{Host: cfg.DockerHost, Instance: derivedInstanceName(cfg)})
	if err != nil {
		return err
	}
	defer e.Close()
	if err := e.Ping(ctx); err != nil {
		return fmt.Errorf("%s (set DOCKER_HOST)", switchboard.Message(err))
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	start := time.Now()
	res, err := (&sandbox.Builder{Engine: e, CacheDir: *cacheDir, Logger: log}).Build(ctx)
	if err != nil {
		return err
	}
	how := fmt.Sprintf("built in %s", time.Since(start).Round(100*time.Millisecond))
	if res.Reused {
		how = "already present"
	}
	fmt.Fprintf(stdout, "%s (%d packages, %s)\n", res.Ref, len(res.Packages), how)
	if !*noLatest {
		latest := sandbox.ImageRepository + ":latest"
		if err := e.TagImage(ctx, res.Ref, latest); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s now points to it (the default of MCP_SERVER_SANDBOX_IMAGE_PYTHON and MCP_SERVER_SANDBOX_IMAGE_NODE)\n", latest)
	} else if *push == "" {
		fmt.Fprintf(stdout, "set MCP_SERVER_SANDBOX_IMAGE_PYTHON=%s and MCP_SERVER_SANDBOX_IMAGE_NODE=%s\n", res.Ref, res.Ref)
	}
	if *push != "" {
		return pushSandboxImage(ctx, e, res.Ref, *push, getenv, stdout)
	}
	return nil
}

// pushSandboxImage tags ref for registry and pushes it, with the
// credentials of SWITCHBOARD_REGISTRY_USER and _PASSWORD when set, and
// prints the pushed name (by digest) for the other gateways' settings.
func pushSandboxImage(ctx context.Context, e *engine.Engine, ref, registry string, getenv func(string) string, stdout io.Writer) error {
	registry = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(registry, "https://"), "http://"), "/")
	_, tag, _ := strings.Cut(ref, ":")
	target := registry + "/" + sandbox.ImageRepository + ":" + tag
	if err := e.CheckImage(target); err != nil {
		return fmt.Errorf("--push %s: %s", registry, switchboard.Message(err))
	}
	if err := e.TagImage(ctx, ref, target); err != nil {
		return err
	}
	var auth *engine.RegistryAuth
	if u := getenv("SWITCHBOARD_REGISTRY_USER"); u != "" {
		auth = &engine.RegistryAuth{Username: u, Password: getenv("SWITCHBOARD_REGISTRY_PASSWORD")}
	}
	if err := e.PushImage(ctx, target, auth); err != nil {
		return err
	}
	name := target
	if d, err := e.ImageDigest(ctx, target); err == nil && d != "" {
		name = d
	}
	fmt.Fprintf(stdout, "pushed %s\non every gateway: MCP_SERVER_SANDBOX_IMAGE_PYTHON=%s MCP_SERVER_SANDBOX_IMAGE_NODE=%s (pulled at the first session)\n", target, name, name)
	return nil
}

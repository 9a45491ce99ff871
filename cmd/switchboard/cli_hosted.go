package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

// hostedCommands manage the project's hosted servers (containers the
// gateway runs) over /api/v1/projects/{p}/mcp/servers.
var hostedCommands = []cliCommand{
	{"hosted ls", "", "List the project's hosted servers with status, image and restarts.", (*cli).hostedLs},
	{"hosted add", "NAME --image IMAGE [--command CMD] [--arg A]... [--env K=V]... [--volume /PATH]... [--cpu N] [--memory SIZE]\n" +
		"      [--disk SIZE] [--network none|bridge|NAME] [--restart always|on-failure|never] [--call-timeout D] [--tool-prefix P]\n" +
		"      [--runtime auto|RUNTIME] [--writable-root] [--pull if-not-present|always|never] [--wait] | --config JSON",
		"Run an MCP server image in a container (admin when an admin token is set). An image the gateway's Docker engine\n" +
			"lacks is pulled from its registry (a progress bar on a terminal, or with --wait). Write ${NAME} (in single\n" +
			"quotes) in --env values to take the project's secret NAME.", (*cli).hostedAdd},
	{"hosted show", "NAME|ID", "Show a hosted server's full status, with CPU and memory usage.", (*cli).hostedShow},
	{"hosted restart", "NAME|ID", "Replace a hosted server's container (SIGTERM, then a new one) and reset its crash counters.", (*cli).hostedRestart},
	{"hosted logs", "NAME|ID [--tail N]", "Print the tail of a hosted server's container log (secrets redacted): its stderr, as its stdout is\n" +
		"the MCP channel (both for a server reached over HTTP, stdio_bridge false).", (*cli).hostedLogs},
	{"hosted rm", "NAME|ID [--keep-volumes]", "Stop and delete a hosted server and, unless --keep-volumes, its volumes.", (*cli).hostedRm},
}

func init() { cliCommands = append(cliCommands, hostedCommands...) }

func (c *cli) hostedLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	out, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.HostedList, error) {
		return api.HostedServers(ctx, c.project)
	})
	if done {
		return err
	}
	rows := make([][]string, 0, len(out.Servers))
	for _, s := range out.Servers {
		rows = append(rows, []string{s.Name, s.Status, s.Image, strconv.Itoa(s.RestartCount), uptime(s.UptimeSeconds), hostedProblem(s, time.Now())})
	}
	return c.table([]string{"NAME", "STATUS", "IMAGE", "RESTARTS", "UPTIME", "PROBLEM"}, rows)
}

// hostedProblem is what the PROBLEM column says of s: its warning, else
// its last error, else its last crash (the console shows it too: a server
// restarted after a crash is running, and was not fine).
func hostedProblem(s switchboard.HostedStatus, now time.Time) string {
	switch {
	case s.Warning != "":
		return firstLine(s.Warning)
	case s.LastError != "":
		return firstLine(s.LastError)
	case s.LastCrash != nil:
		c := s.LastCrash
		p := fmt.Sprintf("crashed %s ago (exit %d", now.Sub(c.At).Round(time.Second), c.ExitCode)
		if c.OOMKilled {
			p += ", out of memory"
		}
		if s.CrashCount > 1 {
			p += fmt.Sprintf("; %d crashes", s.CrashCount)
		}
		return p + ")"
	}
	return ""
}

func uptime(sec float64) string {
	if sec <= 0 {
		return ""
	}
	return (time.Duration(sec) * time.Second).String()
}

func (c *cli) hostedAdd(cmd cliCommand, args []string) error {
	fs := c.flags(cmd.name)
	var reg switchboard.HostedRegistration
	var env kvList
	var hargs, vols strList
	var writable bool
	fs.StringVar(&reg.Image, "image", "", "the `IMAGE` to run (pulled from its registry when the engine lacks it, as --pull says)")
	fs.StringVar(&reg.Command, "command", "", "replace the image's entrypoint with `CMD`")
	fs.Var(&hargs, "arg", "an argument replacing the image's CMD (repeat)")
	fs.Var(&env, "env", "an environment variable `K=V` (repeat); ${NAME} takes a project secret")
	fs.Var(&vols, "volume", "a container `PATH` on a persistent named volume (repeat)")
	fs.StringVar((*string)(&reg.Limits.CPU), "cpu", "", "CPU `CORES` such as 0.5 or 2 (default 0.5)")
	fs.StringVar((*string)(&reg.Limits.Memory), "memory", "", "memory limit `SIZE` such as 256m or 1g (default 512m)")
	fs.StringVar((*string)(&reg.Limits.Disk), "disk", "", "disk limit `SIZE` (default 1g; enforced only where the engine can)")
	fs.StringVar(&reg.Network, "network", "", "none (default), bridge or a Docker network `NAME`")
	fs.StringVar(&reg.RestartPolicy, "restart", "", "restart policy: always, on-failure (default) or never")
	fs.StringVar(&reg.CallTimeout, "call-timeout", "", "per-call timeout `D` such as 45s (default 30s)")
	fs.StringVar(&reg.ToolPrefix, "tool-prefix", "", "`P` put before each of the server's tool names (such as notes_), against collisions")
	fs.StringVar(&reg.Runtime, "runtime", "", "container runtime: auto or a `RUNTIME` the engine lists, such as runc or runsc (default MCP_SERVER_CONTAINER_RUNTIME)")
	fs.BoolVar(&writable, "writable-root", false, "mount the image read-write (default read-only with a /tmp tmpfs)")
	fs.StringVar(&reg.PullPolicy, "pull", "", "pull `POLICY`: if-not-present (default), always or never")
	wait := fs.Bool("wait", false, "wait while the image is pulled, showing its progress (the default when stderr is a terminal)")
	config := fs.String("config", "", "the whole registration as `JSON` (as POST /api/v1/mcp/servers takes it)")
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	if *config != "" {
		set := false
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "config", "gateway", "url", "project", "p", "token", "json", "timeout", "wait":
			default:
				set = true
			}
		})
		if set {
			return &usageError{cmd: cmd.name, msg: "--config holds the whole registration; give no other server flags with it"}
		}
		if err := json.Unmarshal([]byte(*config), &reg); err != nil {
			return &usageError{cmd: cmd.name, msg: "--config is not a JSON object: " + err.Error()}
		}
	} else {
		if reg.Image == "" {
			return &usageError{cmd: cmd.name, msg: "--image is required"}
		}
		reg.Args, reg.Volumes = hargs, vols
		if len(env.m) > 0 {
			reg.Environment = env.m
		}
		if writable {
			reg.ReadOnlyRoot = new(false)
		}
	}
	reg.Name = pos[0]
	st, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (switchboard.HostedStatus, error) {
		return api.RegisterHosted(ctx, c.project, reg)
	})
	if done {
		return err
	}
	if st.Status == switchboard.HostedPulling && (*wait || terminal(c.stderr)) {
		if st, err = c.waitPull(st); err != nil {
			return err
		}
	}
	fmt.Fprintf(c.stdout, "hosted server %s (%s) registered in project %s: %s\n", st.Name, st.ID, c.project, st.Status)
	if st.LastError != "" {
		fmt.Fprintf(c.stdout, "problem: %s\n", st.LastError)
	}
	return nil
}

// terminal reports whether w is a terminal (a progress bar is drawn
// there, not into a file or a pipe).
func terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// waitPull polls a server while it pulls its image, drawing the pull's
// progress on stderr, and returns its status once it is past the pull.
// Interrupting stops the wait, not the pull.
func (c *cli) waitPull(st switchboard.HostedStatus) (switchboard.HostedStatus, error) {
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for st.Status == switchboard.HostedPulling {
		if st.Pull != nil {
			fmt.Fprintf(c.stderr, "\r%s", pullBar(*st.Pull, 30))
		}
		select {
		case <-c.ctx.Done():
			fmt.Fprintln(c.stderr)
			return st, fmt.Errorf("stopped waiting; the pull goes on: see 'switchboard hosted show %s'", st.Name)
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
		next, err := c.api.HostedServer(ctx, c.project, st.ID)
		cancel()
		if err != nil {
			fmt.Fprintln(c.stderr)
			return st, c.explain(err)
		}
		st = next
	}
	fmt.Fprintln(c.stderr)
	return st, nil
}

// pullBar draws a pull's progress in width cells plus its figures:
// "[######--------] 2 of 5 layers, 12.0 of 40.0 MiB Downloading".
func pullBar(p switchboard.PullProgress, width int) string {
	frac := 0.0
	switch {
	case p.TotalBytes > 0:
		frac = float64(p.Bytes) / float64(p.TotalBytes)
	case p.Layers > 0:
		frac = float64(p.LayersDone) / float64(p.Layers)
	}
	n := min(max(int(frac*float64(width)), 0), width)
	s := fmt.Sprintf("pulling %s [%s%s] %s", p.Image, strings.Repeat("#", n), strings.Repeat("-", width-n), p.Figures())
	if p.Status != "" {
		s += " " + p.Status
	}
	return s + "   "
}

func (c *cli) hostedShow(cmd cliCommand, args []string) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	st, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (switchboard.HostedStatus, error) {
		return api.HostedServer(ctx, c.project, pos[0])
	})
	if done {
		return err
	}
	return c.printJSON(st)
}

func (c *cli) hostedRestart(cmd cliCommand, args []string) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	st, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (switchboard.HostedStatus, error) {
		return api.RestartHosted(ctx, c.project, pos[0])
	})
	if done {
		return err
	}
	fmt.Fprintf(c.stdout, "hosted server %s restarting: %s\n", st.Name, st.Status)
	return nil
}

func (c *cli) hostedLogs(cmd cliCommand, args []string) error {
	fs := c.flags(cmd.name)
	tail := fs.Int("tail", 200, "number of log lines")
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	out, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.HostedLogs, error) {
		return api.HostedLogs(ctx, c.project, pos[0], *tail)
	})
	if done {
		return err
	}
	fmt.Fprint(c.stdout, out.Logs)
	if out.Logs != "" && !strings.HasSuffix(out.Logs, "\n") {
		fmt.Fprintln(c.stdout)
	}
	return nil
}

func (c *cli) hostedRm(cmd cliCommand, args []string) error {
	fs := c.flags(cmd.name)
	keep := fs.Bool("keep-volumes", false, "keep the server's named volumes")
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	if _, done, err := do(c, answerless(func(ctx context.Context, api *apiclient.Client) error {
		return api.DeleteHosted(ctx, c.project, pos[0], *keep)
	})); done {
		return err
	}
	fmt.Fprintf(c.stdout, "removed hosted server %s from project %s\n", pos[0], c.project)
	return nil
}

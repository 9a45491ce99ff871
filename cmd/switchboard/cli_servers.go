package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

// serverState is what a server's row shows: its state, tool count and
// problem (its last error, the tools another server shadows).
func serverState(s apiclient.Server) (state, tools, problem string) {
	if !s.Enabled {
		return "disabled", "-", ""
	}
	if s.Status == nil {
		return "-", "-", ""
	}
	problem = s.Status.LastError
	if len(s.Status.Shadowed) > 0 {
		if problem != "" {
			problem += "; "
		}
		problem += "shadowed: " + strings.Join(s.Status.Shadowed, ",")
	}
	return string(s.Status.State), strconv.Itoa(s.Status.Tools), problem
}

func (c *cli) serversLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	out, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.Servers, error) {
		return api.Servers(ctx, c.project)
	})
	if done {
		return err
	}
	products := false
	for _, s := range out.Servers {
		products = products || s.ProductID != ""
	}
	header := []string{"NAME", "SOURCE", "TRANSPORT", "STATE", "TOOLS", "PROBLEM"}
	if products {
		header = append(header, "PRODUCT")
	}
	rows := make([][]string, 0, len(out.Servers))
	for _, s := range out.Servers {
		state, tools, problem := serverState(s)
		row := []string{s.Name, cmp.Or(s.Source, "api"), string(s.Transport), state, tools, firstLine(problem)}
		if products {
			row = append(row, s.ProductID)
		}
		rows = append(rows, row)
	}
	return c.table(header, rows)
}

func (c *cli) serversAdd(cmd cliCommand, args []string) error {
	fs := c.flags(cmd.name)
	var (
		command   = fs.String("command", "", "stdio server: the `program` to run")
		argv      strList
		env       kvList
		cwd       = fs.String("cwd", "", "stdio server: working `directory`")
		remote    = fs.String("url", "", "remote server: its `URL`")
		transport = fs.String("transport", "", "remote server: sse or streamable-http (default: the gateway's guess)")
		headers   kvList
		prefix    = fs.String("tool-prefix", "", "prefix for the server's tool names")
		timeout   = fs.String("call-timeout", "", "per-call `duration` limit, such as 45s")
		config    = fs.String("config", "", "the whole server entry as `JSON` (instead of the flags above)")
		desc      = fs.String("description", "", "what the server is for")
		disabled  = fs.Bool("disabled", false, "add the server disabled")
	)
	fs.Var(&argv, "arg", "stdio server: one argument (repeatable)")
	fs.Var(&env, "env", "stdio server: `K=V` environment variable (repeatable)")
	fs.Var(&headers, "header", "remote server: `K=V` HTTP header (repeatable)")
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	bad := func(msg string) error { return &usageError{cmd: cmd.name, msg: msg} }

	entry := map[string]any{}
	stdio := []string{"command", "arg", "env", "cwd"}
	remoteOnly := []string{"url", "transport", "header"}
	switch {
	case set["config"]:
		for _, f := range append(append(stdio, remoteOnly...), "tool-prefix", "call-timeout") {
			if set[f] {
				return bad("--config gives the whole entry; it cannot be mixed with --" + f)
			}
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(*config), &obj); err != nil || obj == nil {
			return bad("--config must be a JSON object such as {\"command\": \"npx\", \"args\": [...]}")
		}
		return c.addServer(pos[0], *desc, !*disabled, json.RawMessage(*config))
	case *command != "" && *remote != "":
		return bad("give either --command (stdio) or --url (remote), not both; in servers add, --url is the server's URL and --gateway the gateway's")
	case *command != "":
		for _, f := range remoteOnly {
			if set[f] {
				return bad("--" + f + " is for remote servers (--url), not stdio ones (--command)")
			}
		}
		entry["command"] = *command
		if len(argv) > 0 {
			entry["args"] = []string(argv)
		}
		if len(env.keys) > 0 {
			entry["env"] = env.m
		}
		if *cwd != "" {
			entry["cwd"] = *cwd
		}
	case *remote != "":
		for _, f := range stdio {
			if set[f] {
				return bad("--" + f + " is for stdio servers (--command), not remote ones (--url)")
			}
		}
		entry["url"] = *remote
		switch *transport {
		case "":
		case "sse", "streamable-http":
			entry["transport"] = *transport
		default:
			return bad(fmt.Sprintf("--transport %q: want sse or streamable-http", *transport))
		}
		if len(headers.keys) > 0 {
			entry["headers"] = headers.m
		}
	default:
		return bad("say how to reach the server: --command CMD (stdio), --url URL (remote) or --config JSON")
	}
	if *prefix != "" {
		entry["toolPrefix"] = *prefix
	}
	if *timeout != "" {
		if d, err := time.ParseDuration(*timeout); err != nil || d <= 0 {
			return bad(fmt.Sprintf("--call-timeout %q: want a positive duration such as 45s", *timeout))
		}
		entry["callTimeout"] = *timeout
	}
	b, err := json.Marshal(entry)
	if err != nil {
		return err
	}
	return c.addServer(pos[0], *desc, !*disabled, b)
}

func (c *cli) addServer(name, desc string, enabled bool, entry json.RawMessage) error {
	s, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.Server, error) {
		return api.CreateServer(ctx, c.project, apiclient.ServerChange{Name: &name, Description: &desc, Enabled: &enabled, Config: entry})
	})
	if done {
		return err
	}
	state, _, problem := serverState(s)
	fmt.Fprintf(c.stdout, "added server %s (%s) to project %s: %s\n", s.Name, s.Transport, c.project, state)
	if problem != "" {
		fmt.Fprintf(c.stdout, "problem: %s\n", problem)
	}
	return nil
}

func (c *cli) serversRm(cmd cliCommand, args []string) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	if _, done, err := do(c, answerless(func(ctx context.Context, api *apiclient.Client) error {
		return api.DeleteServer(ctx, c.project, pos[0])
	})); done {
		return err
	}
	fmt.Fprintf(c.stdout, "removed server %s from project %s\n", pos[0], c.project)
	return nil
}

func (c *cli) serversEnable(cmd cliCommand, args []string) error {
	return c.setEnabled(cmd, args, true)
}

func (c *cli) serversDisable(cmd cliCommand, args []string) error {
	return c.setEnabled(cmd, args, false)
}

func (c *cli) setEnabled(cmd cliCommand, args []string, enabled bool) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	s, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.Server, error) {
		return api.UpdateServer(ctx, c.project, pos[0], apiclient.ServerChange{Enabled: &enabled})
	})
	if done {
		return err
	}
	state, _, _ := serverState(s)
	fmt.Fprintf(c.stdout, "server %s in project %s: %s\n", s.Name, c.project, state)
	return nil
}

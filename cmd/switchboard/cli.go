package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

// The CLI: `switchboard <command>` manages a running gateway through its
// admin API (/api/v1) and calls tools through a project's MCP endpoint.
// Only the standard library: the commands are thin, and a CLI that pulls
// in the gateway's dependencies would be slower to start for nothing.

const (
	defaultGatewayURL = "http://127.0.0.1:8080"
	defaultTimeout    = 30 * time.Second
	// maxReplyBytes bounds what the CLI reads from one reply.
	maxReplyBytes = 64 << 20
	// maxSecretBytes is the API's limit on a secret value.
	maxSecretBytes = 65536
)

// errHelp reports that usage was printed on request; runCLI returns nil.
var errHelp = errors.New("help requested")

// usageError is a command line the CLI cannot run. It is reported before
// any request is sent.
type usageError struct {
	cmd string
	msg string
}

func (e *usageError) Error() string {
	return fmt.Sprintf("%s: %s (see 'switchboard %s -h')", e.cmd, e.msg, e.cmd)
}

// unreachableError is a gateway the CLI could not connect to.
type unreachableError struct {
	URL    string // the gateway URL, as configured
	Reason string // "connection refused", "no such host", ...
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach the gateway at %s (%s): is it running? Start it with 'switchboard', or point --url or SWITCHBOARD_URL at it", e.URL, e.Reason)
}

// apiError is an HTTP error answer, from the admin API or an MCP
// endpoint, explained for the command line.
type apiError apiclient.Error

func (e *apiError) Error() string {
	var b strings.Builder
	b.WriteString((*apiclient.Error)(e).Error())
	switch {
	case e.Status == http.StatusUnauthorized:
		b.WriteString(" (pass a valid token with --token or SWITCHBOARD_TOKEN)")
	case e.Status == http.StatusForbidden && e.Message == "":
		// The gateway's own 403s say why (another project's token, or
		// what needs the admin token); a hint after them would contradict
		// the reason. Only an answer without one gets the general rule.
		b.WriteString(" (this token may not do that: project tokens reach only their own project; the rest needs the admin token)")
	case e.Status == http.StatusNotFound && e.Code == "" && strings.HasPrefix(e.Path, "/api/"):
		b.WriteString(" (is this a Switchboard gateway with the admin API? check --url)")
	}
	return b.String()
}

// cliCommand is one `switchboard GROUP [SUB]` command.
type cliCommand struct {
	name  string // "servers add"
	args  string // positional arguments and main flags, for the usage line
	about string
	run   func(c *cli, cmd cliCommand, args []string) error
}

// cliCommands lists every command, in the order a group's usage shows them.
var cliCommands = []cliCommand{
	{"projects ls", "", "List projects and their MCP endpoints.", (*cli).projectsLs},
	{"projects add", "ID [--description D]", "Create a project. ID: lower-case letters, digits, '-' and '_'.", (*cli).projectsAdd},
	{"projects rm", "[--force] ID", "Delete a project with its servers, secrets and tokens; --force also when it runs sandbox sessions or hosted servers or keeps workspaces, which go with it.", (*cli).projectsRm},
	{"servers ls", "", "List the project's servers and their state.", (*cli).serversLs},
	{"servers add", "NAME (--command CMD [--arg A]... [--env K=V]... [--cwd DIR] | --url URL [--transport T] [--header K=V]... | --config JSON)",
		"Add an MCP server to the project. In this command --url is the server's URL; give the gateway's with --gateway or SWITCHBOARD_URL.\n" +
			"Write ${VAR} (in single quotes) to take a value from the project's secrets at connect time.", (*cli).serversAdd},
	{"servers rm", "NAME", "Remove a server from the project.", (*cli).serversRm},
	{"servers enable", "NAME", "Enable a server (it reconnects).", (*cli).serversEnable},
	{"servers disable", "NAME", "Disable a server: it is stopped and its tools disappear.", (*cli).serversDisable},
	{"tools ls", "", "List the tools the project's MCP endpoint offers.", (*cli).toolsLs},
	{"call", "TOOL [JSON-ARGS|-|KEY=VALUE...]", "Call a tool through the project's MCP endpoint and print the result.\n" +
		"JSON-ARGS is a JSON object ('-' reads it from stdin); or give the arguments as KEY=VALUE\n" +
		"(a string) and KEY:=JSON (any JSON value), as in `switchboard call mcp-add name=fetch`.\n" +
		"Exits 1 when the tool reports an error.", (*cli).call},
	{"secrets ls", "", "List the project's secret names (values are never shown).", (*cli).secretsLs},
	{"secrets set", "NAME [VALUE]", "Set a secret. Without VALUE it is read from stdin (one trailing newline is dropped),\n" +
		"which keeps it out of the shell history.", (*cli).secretsSet},
	{"secrets rm", "NAME", "Delete a secret.", (*cli).secretsRm},
	{"tokens ls", "", "List the project's tokens (admin).", (*cli).tokensLs},
	{"tokens create", "NAME", "Create a project token (admin) and print it on stdout. It is shown only this once.", (*cli).tokensCreate},
	{"tokens revoke", "ID", "Revoke a project token (admin).", (*cli).tokensRevoke},
	{"history", "[--server S] [--tool T] [--outcome ok|tool_error|error] [--since T] [--limit N] [--cursor C]",
		"List the project's tool calls, newest first.", (*cli).history},
	{"reload", "", "Re-read the gateway's servers file (MCP_SERVER_CONFIG), as SIGHUP does (admin).", (*cli).reload},
}

// cli holds one invocation's streams, global flags and HTTP client.
type cli struct {
	ctx    context.Context
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	http   *http.Client

	gateway  string // --url, without a trailing slash
	project  string
	token    string
	envToken string // SWITCHBOARD_TOKEN: kept out of the flag's default, which -h prints
	json     bool
	timeout  time.Duration

	// api is the admin API's client, made by parse from the flags.
	api *apiclient.Client
}

// runCLI runs one CLI command; args start with the command's name
// ("servers", "ls", ...). Errors are returned for main to print; usage
// asked for with -h is printed on stdout and is not an error.
func runCLI(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := &cli{ctx: ctx, getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr, http: &http.Client{}}
	if len(args) == 0 {
		return &usageError{cmd: "switchboard", msg: "no command"}
	}
	group := args[0]
	var subs []cliCommand
	for _, cmd := range cliCommands {
		if g, sub, _ := strings.Cut(cmd.name, " "); g == group {
			if sub == "" {
				// A command without subcommands: everything else is its arguments.
				return c.invoke(cmd, args[1:])
			}
			subs = append(subs, cmd)
		}
	}
	if len(subs) == 0 {
		return &usageError{cmd: "switchboard", msg: fmt.Sprintf("unknown command %q", group)}
	}
	if len(args) < 2 || args[1] == "-h" || args[1] == "-help" || args[1] == "--help" {
		w := stdout
		if len(args) < 2 {
			w = stderr
		}
		fmt.Fprintf(w, "Usage:\n")
		for _, cmd := range subs {
			fmt.Fprintf(w, "  %s\n", strings.TrimSpace("switchboard "+cmd.name+" "+cmd.args))
		}
		if len(args) < 2 {
			return &usageError{cmd: group, msg: "missing subcommand"}
		}
		return nil
	}
	for _, cmd := range subs {
		if _, sub, _ := strings.Cut(cmd.name, " "); sub == args[1] {
			return c.invoke(cmd, args[2:])
		}
	}
	return &usageError{cmd: group, msg: fmt.Sprintf("unknown subcommand %q", args[1])}
}

func (c *cli) invoke(cmd cliCommand, args []string) error {
	err := cmd.run(c, cmd, args)
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// flags returns a FlagSet for cmd with the global flags. --gateway is an
// alias of --url on every command, for `servers add` where --url is the
// added server's.
func (c *cli) flags(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	gw := c.getenv("SWITCHBOARD_URL")
	if gw == "" {
		gw = defaultGatewayURL
	}
	c.gateway = gw
	fs.StringVar(&c.gateway, "gateway", gw, "gateway `URL` (env SWITCHBOARD_URL)")
	if cmd != "servers add" {
		fs.StringVar(&c.gateway, "url", gw, "gateway `URL` (env SWITCHBOARD_URL)")
	}
	c.project = c.getenv("SWITCHBOARD_PROJECT")
	if c.project == "" {
		c.project = "default"
	}
	fs.StringVar(&c.project, "project", c.project, "`project` (env SWITCHBOARD_PROJECT)")
	fs.StringVar(&c.project, "p", c.project, "short for --project")
	c.envToken = c.getenv("SWITCHBOARD_TOKEN")
	fs.StringVar(&c.token, "token", "", "bearer `token` (env SWITCHBOARD_TOKEN)")
	fs.BoolVar(&c.json, "json", false, "print the API's JSON")
	fs.DurationVar(&c.timeout, "timeout", defaultTimeout, "limit for each request")
	return fs
}

// parse parses flags and positional arguments in any order ("servers add
// x --command y" and "servers add --command y x" alike; "--" ends flags)
// and checks the number of positional arguments is in [min, max].
func (c *cli) parse(fs *flag.FlagSet, cmd cliCommand, args []string, minArgs, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.printUsage(fs, cmd)
				return nil, errHelp
			}
			return nil, &usageError{cmd: cmd.name, msg: err.Error()}
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if c.token == "" {
		c.token = c.envToken
	}
	if len(pos) < minArgs || len(pos) > maxArgs {
		want := cmd.args
		if want == "" {
			want = "no arguments"
		}
		return nil, &usageError{cmd: cmd.name, msg: fmt.Sprintf("got %d arguments, want %s", len(pos), want)}
	}
	gw, err := normalizeGateway(c.gateway)
	if err != nil {
		return nil, &usageError{cmd: cmd.name, msg: err.Error()}
	}
	c.gateway = gw
	c.api = &apiclient.Client{URL: gw, Token: c.token, HTTP: c.http, UserAgent: userAgent, MaxReply: maxReplyBytes}
	if c.project == "" {
		return nil, &usageError{cmd: cmd.name, msg: "--project is empty"}
	}
	if c.timeout <= 0 {
		return nil, &usageError{cmd: cmd.name, msg: "--timeout must be positive"}
	}
	return pos, nil
}

func (c *cli) printUsage(fs *flag.FlagSet, cmd cliCommand) {
	fmt.Fprintf(c.stdout, "Usage: switchboard %s %s\n\n%s\n\nFlags:\n", cmd.name, cmd.args, cmd.about)
	fs.SetOutput(c.stdout)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// normalizeGateway checks the gateway URL and drops a trailing slash;
// "host:port" means http://host:port.
func normalizeGateway(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("gateway URL %q: want http(s)://host:port", s)
	}
	if u.User != nil {
		return "", fmt.Errorf("gateway URL: give credentials with --token, not in the URL")
	}
	return strings.TrimRight(s, "/"), nil
}

// userAgent is the CLI's User-Agent on every request.
var userAgent = "switchboard-cli/" + version

// do runs one admin API call under --timeout: call gets the context and
// the client. It explains a failure; with --json it prints the answer
// (nothing for an answer without a body) and reports done, as the
// command has nothing more to print.
func do[T any](c *cli, call func(ctx context.Context, api *apiclient.Client) (T, error)) (out T, done bool, err error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	out, err = call(ctx, c.api)
	if err != nil {
		return out, true, c.explain(err)
	}
	if c.json {
		return out, true, c.printJSON(out)
	}
	return out, false, nil
}

// noBody is the answer of a call that has none (204).
type noBody struct{}

// answerless adapts a call without an answer to do.
func answerless(call func(ctx context.Context, api *apiclient.Client) error) func(context.Context, *apiclient.Client) (*noBody, error) {
	return func(ctx context.Context, api *apiclient.Client) (*noBody, error) { return nil, call(ctx, api) }
}

// explain turns an API client's error into the CLI's: an HTTP error
// answer with a hint, or why no answer came.
func (c *cli) explain(err error) error {
	var he *apiclient.Error
	if errors.As(err, &he) {
		return (*apiError)(he)
	}
	var re *apiclient.RequestError
	if errors.As(err, &re) {
		return c.transportError(re.Method, re.Path, re.Err)
	}
	return err
}

func (c *cli) authorize(req *http.Request) {
	req.Header.Set("User-Agent", userAgent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// transportError explains a request that got no HTTP answer. The token is
// only ever in a header, so no error carries it.
func (c *cli) transportError(method, path string, err error) error {
	if c.ctx.Err() != nil {
		return c.ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s %s: no answer from %s within %s (raise --timeout for slow tools)", method, path, c.gateway, c.timeout)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		reason := op.Err.Error()
		if errors.Is(err, syscall.ECONNREFUSED) {
			reason = "connection refused"
		}
		return &unreachableError{URL: c.gateway, Reason: reason}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return &unreachableError{URL: c.gateway, Reason: "cannot resolve " + dns.Name}
	}
	return fmt.Errorf("%s %s: %w", method, path, err)
}

// decodeHTTPError reads an MCP endpoint's HTTP error answer as the API's.
func decodeHTTPError(method, path string, status int, raw []byte) error {
	return (*apiError)(apiclient.DecodeError(method, path, status, raw))
}

// snippet is the start of a text for an error message.
func snippet(raw []byte) string { return apiclient.Snippet(raw) }

// printJSON prints v as indented JSON; nil prints nothing.
func (c *cli) printJSON(v any) error {
	if v == nil || reflect.ValueOf(v).Kind() == reflect.Pointer && reflect.ValueOf(v).IsNil() {
		return nil
	}
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints rows aligned under header.
func (c *cli) table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		for i := range r {
			r[i] = cell(r[i])
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// cell keeps a table cell on one line: tabs and newlines would break the
// alignment.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if utf8.RuneCountInString(s) > 80 {
		s = string([]rune(s)[:77]) + "..."
	}
	return s
}

// when formats an API timestamp for a table, to the second in UTC.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// mcpEndpoint is the MCP URL of project: /mcp for "default".
func (c *cli) mcpEndpoint(project string) string {
	if project == "default" {
		return c.gateway + "/mcp"
	}
	return c.gateway + "/projects/" + url.PathEscape(project) + "/mcp"
}

// kvList is a repeatable K=V flag.
type kvList struct {
	keys []string
	m    map[string]string
}

func (l *kvList) String() string { return "" }

func (l *kvList) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want KEY=VALUE", s)
	}
	if l.m == nil {
		l.m = map[string]string{}
	}
	if _, dup := l.m[k]; !dup {
		l.keys = append(l.keys, k)
	}
	l.m[k] = v
	return nil
}

// strList is a repeatable string flag.
type strList []string

func (l *strList) String() string     { return "" }
func (l *strList) Set(s string) error { *l = append(*l, s); return nil }

package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"
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
// endpoint.
type apiError struct {
	Method  string
	Path    string
	Status  int    // HTTP status
	Code    string // the API's error code ("not_found"), or a JSON-RPC code
	Message string // the API's message, or the start of a body that was not JSON
}

func (e *apiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %d %s", e.Method, e.Path, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
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

// projectPath is the API path of the current project plus rest.
func (c *cli) projectPath(rest ...string) string {
	p := "/projects/" + url.PathEscape(c.project)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// api sends one admin API request (path is below /api/v1) and decodes a
// JSON answer into out when out is not nil. It returns the raw answer.
func (c *cli) api(method, path string, body any, out any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	full := "/api/v1" + path
	req, err := http.NewRequestWithContext(ctx, method, c.gateway+full, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(method, full, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if err != nil {
		return nil, c.transportError(method, full, err)
	}
	if resp.StatusCode >= 300 {
		return nil, decodeHTTPError(method, full, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("%s %s: unexpected answer (%v): %s", method, full, err, snippet(raw))
		}
	}
	return raw, nil
}

func (c *cli) authorize(req *http.Request) {
	req.Header.Set("User-Agent", "switchboard-cli/"+version)
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

// decodeHTTPError reads an error answer: the API's {"error": {"code",
// "message"}}, a JSON-RPC error (numeric code) or anything else.
func decodeHTTPError(method, path string, status int, raw []byte) error {
	e := &apiError{Method: method, Path: path, Status: status}
	var body struct {
		Error struct {
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && (body.Error.Message != "" || len(body.Error.Code) > 0) {
		e.Message = body.Error.Message
		var s string
		if json.Unmarshal(body.Error.Code, &s) == nil {
			e.Code = s
		} else {
			e.Code = string(body.Error.Code)
		}
		return e
	}
	e.Message = snippet(raw)
	return e
}

// snippet is the start of a body for an error message.
func snippet(raw []byte) string {
	s := strings.TrimSpace(string(raw))
	if len(s) > 200 {
		s = s[:200]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "..."
	}
	return s
}

// printJSON prints raw indented; an empty answer (204) prints nothing.
func (c *cli) printJSON(raw []byte) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		_, err = c.stdout.Write(raw)
		return err
	}
	b.WriteByte('\n')
	_, err := c.stdout.Write(b.Bytes())
	return err
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
func when(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// Projects.

type apiProject struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	MCPURL      string `json:"mcp_url"`
	CreatedAt   string `json:"created_at"`
}

// endpoint is the absolute MCP URL of a project, to paste into a client.
func (c *cli) endpoint(p apiProject) string {
	if p.MCPURL == "" {
		return c.mcpEndpoint(p.ID)
	}
	if strings.Contains(p.MCPURL, "://") {
		return p.MCPURL
	}
	return c.gateway + p.MCPURL
}

// mcpEndpoint is the MCP URL of project: /mcp for "default".
func (c *cli) mcpEndpoint(project string) string {
	if project == "default" {
		return c.gateway + "/mcp"
	}
	return c.gateway + "/projects/" + url.PathEscape(project) + "/mcp"
}

func (c *cli) projectsLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	var out struct {
		Projects []apiProject `json:"projects"`
	}
	raw, err := c.api(http.MethodGet, "/projects", nil, &out)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	rows := make([][]string, 0, len(out.Projects))
	for _, p := range out.Projects {
		rows = append(rows, []string{p.ID, c.endpoint(p), p.Description})
	}
	return c.table([]string{"ID", "MCP ENDPOINT", "DESCRIPTION"}, rows)
}

// orJSON ends a command that got err or was asked for --json.
func orJSON(c *cli, raw []byte, err error) error {
	if err != nil {
		return err
	}
	return c.printJSON(raw)
}

func (c *cli) projectsAdd(cmd cliCommand, args []string) error {
	fs := c.flags(cmd.name)
	desc := fs.String("description", "", "what the project is for")
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	var p apiProject
	raw, err := c.api(http.MethodPost, "/projects", map[string]string{"id": pos[0], "description": *desc}, &p)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	fmt.Fprintf(c.stdout, "created project %s\nMCP endpoint: %s\n", p.ID, c.endpoint(p))
	return nil
}

func (c *cli) projectsRm(cmd cliCommand, args []string) error {
	fs := c.flags(cmd.name)
	force := fs.Bool("force", false, "delete it with its sandbox sessions, hosted servers, workspaces and volumes")
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	c.project = pos[0]
	path := c.projectPath()
	if *force {
		path += "?force=true"
	}
	raw, err := c.api(http.MethodDelete, path, nil, nil)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	fmt.Fprintf(c.stdout, "deleted project %s\n", pos[0])
	return nil
}

// Servers.

type apiServer struct {
	Name      string          `json:"name"`
	ProductID string          `json:"product_id"`
	Transport string          `json:"transport"`
	Enabled   bool            `json:"enabled"`
	Config    json.RawMessage `json:"config"`
	Source    string          `json:"source"`
	Status    *struct {
		State string `json:"state"`
		Tools int    `json:"tools"`
		// The design says last_error; the gateway's status JSON (GET /)
		// says lastError. Either is read.
		LastError  string   `json:"last_error"`
		LastError2 string   `json:"lastError"`
		Shadowed   []string `json:"shadowed"`
	} `json:"status"`
}

func (s apiServer) state() (state, tools, problem string) {
	if !s.Enabled {
		return "disabled", "-", ""
	}
	if s.Status == nil {
		return "-", "-", ""
	}
	problem = cmp.Or(s.Status.LastError, s.Status.LastError2)
	if len(s.Status.Shadowed) > 0 {
		if problem != "" {
			problem += "; "
		}
		problem += "shadowed: " + strings.Join(s.Status.Shadowed, ",")
	}
	return s.Status.State, strconv.Itoa(s.Status.Tools), problem
}

func (c *cli) serversLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	var out struct {
		Servers []apiServer `json:"servers"`
	}
	raw, err := c.api(http.MethodGet, c.projectPath("servers"), nil, &out)
	if err != nil || c.json {
		return orJSON(c, raw, err)
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
		state, tools, problem := s.state()
		row := []string{s.Name, cmp.Or(s.Source, "api"), s.Transport, state, tools, firstLine(problem)}
		if products {
			row = append(row, s.ProductID)
		}
		rows = append(rows, row)
	}
	return c.table(header, rows)
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
	body := map[string]any{"name": name, "description": desc, "enabled": enabled, "config": entry}
	var s apiServer
	raw, err := c.api(http.MethodPost, c.projectPath("servers"), body, &s)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	state, _, problem := s.state()
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
	raw, err := c.api(http.MethodDelete, c.projectPath("servers", pos[0]), nil, nil)
	if err != nil || c.json {
		return orJSON(c, raw, err)
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
	var s apiServer
	raw, err := c.api(http.MethodPatch, c.projectPath("servers", pos[0]), map[string]bool{"enabled": enabled}, &s)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	state, _, _ := s.state()
	fmt.Fprintf(c.stdout, "server %s in project %s: %s\n", s.Name, c.project, state)
	return nil
}

// Tools.

func (c *cli) toolsLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	var out struct {
		Tools []struct {
			Name   string `json:"name"`
			Server string `json:"server"`
			Tool   struct {
				Description string `json:"description"`
			} `json:"tool"`
		} `json:"tools"`
	}
	raw, err := c.api(http.MethodGet, c.projectPath("tools"), nil, &out)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	rows := make([][]string, 0, len(out.Tools))
	for _, t := range out.Tools {
		rows = append(rows, []string{t.Name, t.Server, firstLine(t.Tool.Description)})
	}
	return c.table([]string{"TOOL", "SERVER", "DESCRIPTION"}, rows)
}

// Secrets.

type apiSecret struct {
	Name      string `json:"name"`
	UpdatedAt string `json:"updated_at"`
}

func (c *cli) secretsLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	var out struct {
		Secrets []apiSecret `json:"secrets"`
	}
	raw, err := c.api(http.MethodGet, c.projectPath("secrets"), nil, &out)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	rows := make([][]string, 0, len(out.Secrets))
	for _, s := range out.Secrets {
		rows = append(rows, []string{s.Name, when(s.UpdatedAt)})
	}
	return c.table([]string{"NAME", "UPDATED"}, rows)
}

func (c *cli) secretsSet(cmd cliCommand, args []string) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 2)
	if err != nil {
		return err
	}
	var value string
	if len(pos) == 2 {
		value = pos[1]
	} else {
		if f, ok := c.stdin.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				fmt.Fprintf(c.stderr, "value of %s (then Enter and Ctrl-D): ", pos[0])
			}
		}
		value, err = readSecret(c.stdin)
		if err != nil {
			return fmt.Errorf("%s: %w", cmd.name, err)
		}
	}
	if value == "" {
		return &usageError{cmd: cmd.name, msg: "the value is empty"}
	}
	var s apiSecret
	raw, err := c.api(http.MethodPut, c.projectPath("secrets", pos[0]), map[string]string{"value": value}, &s)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	fmt.Fprintf(c.stdout, "set secret %s in project %s\n", s.Name, c.project)
	return nil
}

// readSecret reads a secret value from r, without one trailing newline
// (\n or \r\n) as echo and editors add. It refuses an empty value and one
// over the API's limit.
func readSecret(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSecretBytes+3))
	if err != nil {
		return "", fmt.Errorf("reading the value from stdin: %w", err)
	}
	if len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
		if len(b) > 0 && b[len(b)-1] == '\r' {
			b = b[:len(b)-1]
		}
	}
	switch {
	case len(b) == 0:
		return "", errors.New("the value on stdin is empty; pipe it in, such as: printf %s \"$VALUE\" | switchboard secrets set NAME")
	case len(b) > maxSecretBytes:
		return "", fmt.Errorf("the value is over %d bytes", maxSecretBytes)
	case !utf8.Valid(b):
		return "", errors.New("the value is not UTF-8 text")
	}
	return string(b), nil
}

func (c *cli) secretsRm(cmd cliCommand, args []string) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	raw, err := c.api(http.MethodDelete, c.projectPath("secrets", pos[0]), nil, nil)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	fmt.Fprintf(c.stdout, "deleted secret %s from project %s\n", pos[0], c.project)
	return nil
}

// Tokens.

type apiToken struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
	RevokedAt string `json:"revoked_at"`
	Token     string `json:"token"`
}

func (c *cli) tokensLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	var out struct {
		Tokens []apiToken `json:"tokens"`
	}
	raw, err := c.api(http.MethodGet, c.projectPath("tokens"), nil, &out)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	rows := make([][]string, 0, len(out.Tokens))
	for _, t := range out.Tokens {
		revoked := ""
		if t.RevokedAt != "" {
			revoked = when(t.RevokedAt)
		}
		rows = append(rows, []string{t.ID, t.Name, when(t.CreatedAt), revoked})
	}
	return c.table([]string{"ID", "NAME", "CREATED", "REVOKED"}, rows)
}

// tokensCreate prints the new token alone on stdout, so that
// TOKEN=$(switchboard tokens create ci) works; the rest goes to stderr.
func (c *cli) tokensCreate(cmd cliCommand, args []string) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	var t apiToken
	raw, err := c.api(http.MethodPost, c.projectPath("tokens"), map[string]string{"name": pos[0]}, &t)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	fmt.Fprintf(c.stderr, "created token %s (%s) for project %s; it is shown only now:\n", t.ID, t.Name, c.project)
	fmt.Fprintln(c.stdout, t.Token)
	return nil
}

func (c *cli) tokensRevoke(cmd cliCommand, args []string) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	var t apiToken
	raw, err := c.api(http.MethodDelete, c.projectPath("tokens", pos[0]), nil, &t)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	fmt.Fprintf(c.stdout, "revoked token %s (%s) of project %s\n", t.ID, t.Name, c.project)
	return nil
}

func (c *cli) reload(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	var res struct {
		Servers int `json:"servers"`
	}
	raw, err := c.api(http.MethodPost, "/reload", struct{}{}, &res)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	fmt.Fprintf(c.stdout, "reloaded the servers file: %d servers\n", res.Servers)
	return nil
}

// History.

func (c *cli) history(cmd cliCommand, args []string) error {
	fs := c.flags(cmd.name)
	server := fs.String("server", "", "only calls to this server")
	tool := fs.String("tool", "", "only calls of this tool")
	outcome := fs.String("outcome", "", "only calls with this outcome: ok, tool_error or error")
	since := fs.String("since", "", "only calls since `T`: RFC 3339 time or a duration ago such as 1h")
	limit := fs.Int("limit", 50, "at most `N` calls (1..1000)")
	cursor := fs.String("cursor", "", "continue a listing where the previous one stopped")
	if _, err := c.parse(fs, cmd, args, 0, 0); err != nil {
		return err
	}
	bad := func(msg string) error { return &usageError{cmd: cmd.name, msg: msg} }
	q := url.Values{}
	switch *outcome {
	case "", "ok", "tool_error", "error":
	default:
		return bad(fmt.Sprintf("--outcome %q: want ok, tool_error or error", *outcome))
	}
	if *limit < 1 || *limit > 1000 {
		return bad("--limit must be in 1..1000")
	}
	if *since != "" {
		t, err := time.Parse(time.RFC3339Nano, *since)
		if err != nil {
			d, derr := time.ParseDuration(*since)
			if derr != nil || d < 0 {
				return bad(fmt.Sprintf("--since %q: want an RFC 3339 time or a duration such as 1h", *since))
			}
			t = time.Now().Add(-d)
		}
		q.Set("since", t.UTC().Format(time.RFC3339Nano))
	}
	for k, v := range map[string]string{"server": *server, "tool": *tool, "outcome": *outcome, "cursor": *cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	q.Set("limit", strconv.Itoa(*limit))
	var out struct {
		Calls []struct {
			Session    string  `json:"session"`
			Server     string  `json:"server"`
			Tool       string  `json:"tool"`
			Outcome    string  `json:"outcome"`
			Code       int     `json:"code"`
			DurationMS float64 `json:"duration_ms"`
			StartedAt  string  `json:"started_at"`
		} `json:"calls"`
		Next string `json:"next"`
	}
	raw, err := c.api(http.MethodGet, c.projectPath("tool-calls")+"?"+q.Encode(), nil, &out)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	rows := make([][]string, 0, len(out.Calls))
	for _, k := range out.Calls {
		outcome := k.Outcome
		if k.Code != 0 {
			outcome += " " + strconv.Itoa(k.Code)
		}
		rows = append(rows, []string{when(k.StartedAt), k.Server, k.Tool, outcome, time.Duration(k.DurationMS * float64(time.Millisecond)).Round(time.Microsecond).String(), k.Session})
	}
	if err := c.table([]string{"STARTED", "SERVER", "TOOL", "OUTCOME", "DURATION", "SESSION"}, rows); err != nil {
		return err
	}
	if out.Next != "" {
		fmt.Fprintf(c.stderr, "more calls: add --cursor %s\n", out.Next)
	}
	return nil
}

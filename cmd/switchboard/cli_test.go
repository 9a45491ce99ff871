package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

// cliRunner drives runCLI with buffers, the way a shell would.
type cliRunner struct {
	t   *testing.T
	env map[string]string
	// seen is every byte the CLI printed, to check secrets never show.
	seen strings.Builder
}

func newCLI(t *testing.T, env map[string]string) *cliRunner {
	return &cliRunner{t: t, env: env}
}

// run runs one command with stdin and returns what it printed.
func (r *cliRunner) run(stdin string, args ...string) (stdout, stderr string, err error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut strings.Builder
	err = runCLI(ctx, args, func(k string) string { return r.env[k] }, strings.NewReader(stdin), &out, &errOut)
	r.seen.WriteString(out.String() + errOut.String())
	if err != nil {
		r.seen.WriteString(err.Error())
	}
	return out.String(), errOut.String(), err
}

// ok runs a command that must succeed and returns its stdout.
func (r *cliRunner) ok(args ...string) string {
	r.t.Helper()
	out, errOut, err := r.run("", args...)
	if err != nil {
		r.t.Fatalf("switchboard %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// fails runs a command that must fail and returns its error.
func (r *cliRunner) fails(args ...string) error {
	r.t.Helper()
	out, _, err := r.run("", args...)
	if err == nil {
		r.t.Fatalf("switchboard %s succeeded, want an error\nstdout: %s", strings.Join(args, " "), out)
	}
	return err
}

// closedURL is a loopback URL nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

// TestCLIUsageErrors: command lines the CLI refuses before sending
// anything. The gateway URL is a closed port, so a request would show as
// an unreachableError instead.
func TestCLIUsageErrors(t *testing.T) {
	r := newCLI(t, map[string]string{"SWITCHBOARD_URL": closedURL(t)})
	tests := []struct {
		name string
		args []string
	}{
		{"no command", nil},
		{"unknown command", []string{"frobnicate"}},
		{"missing subcommand", []string{"servers"}},
		{"unknown subcommand", []string{"servers", "frob"}},
		{"unknown flag", []string{"projects", "ls", "--nope"}},
		{"missing argument", []string{"projects", "add"}},
		{"extra argument", []string{"projects", "add", "a", "b"}},
		{"extra argument after --", []string{"servers", "rm", "--", "a", "b"}},
		{"bad gateway URL", []string{"projects", "ls", "--url", "ftp://example.com"}},
		{"credentials in the gateway URL", []string{"projects", "ls", "--url", "http://u:p@127.0.0.1:1"}},
		{"empty project", []string{"servers", "ls", "-p", ""}},
		{"zero timeout", []string{"servers", "ls", "--timeout", "0s"}},
		{"bad timeout", []string{"servers", "ls", "--timeout", "soon"}},
		{"server without command or url", []string{"servers", "add", "x"}},
		{"server with command and url", []string{"servers", "add", "x", "--command", "a", "--url", "http://h/mcp"}},
		{"config mixed with flags", []string{"servers", "add", "x", "--config", `{"command":"a"}`, "--arg", "b"}},
		{"config mixed with prefix", []string{"servers", "add", "x", "--config", `{"command":"a"}`, "--tool-prefix", "p_"}},
		{"config not an object", []string{"servers", "add", "x", "--config", `["a"]`}},
		{"config not JSON", []string{"servers", "add", "x", "--config", `{command: a}`}},
		{"env without =", []string{"servers", "add", "x", "--command", "a", "--env", "FOO"}},
		{"header without key", []string{"servers", "add", "x", "--url", "http://h/mcp", "--header", "=v"}},
		{"header on stdio", []string{"servers", "add", "x", "--command", "a", "--header", "K=V"}},
		{"transport on stdio", []string{"servers", "add", "x", "--command", "a", "--transport", "sse"}},
		{"arg on remote", []string{"servers", "add", "x", "--url", "http://h/mcp", "--arg", "a"}},
		{"unknown transport", []string{"servers", "add", "x", "--url", "http://h/mcp", "--transport", "websocket"}},
		{"bad call timeout", []string{"servers", "add", "x", "--command", "a", "--call-timeout", "45"}},
		{"call without tool", []string{"call"}},
		{"call args an array", []string{"call", "echo", "[1]"}},
		{"call args a string", []string{"call", "echo", `"x"`}},
		{"call args not JSON", []string{"call", "echo", "{text: 1}"}},
		{"call args trailing data", []string{"call", "echo", "{} {}"}},
		{"secret without name", []string{"secrets", "set"}},
		{"secret with empty value", []string{"secrets", "set", "K", ""}},
		{"history limit not a number", []string{"history", "--limit", "x"}},
		{"history limit too big", []string{"history", "--limit", "1001"}},
		{"history unknown outcome", []string{"history", "--outcome", "maybe"}},
		{"history bad since", []string{"history", "--since", "yesterday"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.t = t
			err := r.fails(tt.args...)
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("got %T %v, want a usageError", err, err)
			}
		})
	}
}

// TestCLIEmptySecretFromStdin: an empty value on stdin is refused, before
// any request.
func TestCLIEmptySecretFromStdin(t *testing.T) {
	r := newCLI(t, map[string]string{"SWITCHBOARD_URL": closedURL(t)})
	for _, in := range []string{"", "\n", "\r\n"} {
		_, _, err := r.run(in, "secrets", "set", "K")
		var ue *unreachableError
		if err == nil || errors.As(err, &ue) {
			t.Errorf("stdin %q: got %v, want a refusal before any request", in, err)
		}
	}
}

func TestCLIReadSecret(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "s3cret", want: "s3cret"},
		{in: "s3cret\n", want: "s3cret"},
		{in: "s3cret\r\n", want: "s3cret"},
		{in: "s3cret\n\n", want: "s3cret\n"},
		{in: "two\nlines\n", want: "two\nlines"},
		{in: " spaced \n", want: " spaced "},
		{in: "", wantErr: true},
		{in: "\n", wantErr: true},
		{in: "\xff\xfe", wantErr: true},
		{in: strings.Repeat("a", maxSecretBytes), want: strings.Repeat("a", maxSecretBytes)},
		{in: strings.Repeat("a", maxSecretBytes) + "\n", want: strings.Repeat("a", maxSecretBytes)},
		{in: strings.Repeat("a", maxSecretBytes+1), wantErr: true},
	}
	for _, tt := range tests {
		got, err := readSecret(strings.NewReader(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("readSecret(%.20q) = %.20q, %v; want %.20q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestCLIHelp: -h on every command prints its usage on stdout and is not
// an error, through run as main calls it; the token is never shown.
func TestCLIHelp(t *testing.T) {
	env := map[string]string{"SWITCHBOARD_TOKEN": "sbt_never_printed", "SWITCHBOARD_URL": closedURL(t)}
	for _, cmd := range cliCommands {
		t.Run(cmd.name, func(t *testing.T) {
			var out, errOut strings.Builder
			args := append(strings.Fields(cmd.name), "-h")
			if err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut); err != nil {
				t.Fatalf("run %v: %v", args, err)
			}
			if !strings.HasPrefix(out.String(), "Usage: switchboard "+cmd.name) {
				t.Errorf("stdout:\n%s", out.String())
			}
			if strings.Contains(out.String()+errOut.String(), "sbt_never_printed") {
				t.Errorf("the token was printed")
			}
			group, _, _ := strings.Cut(cmd.name, " ")
			if !strings.Contains(usage, "switchboard "+group) {
				t.Errorf("switchboard -h does not mention %q", group)
			}
		})
	}
}

// TestSandboxBuildImageHelp: `sandbox build-image -h` prints the sandbox
// usage on stdout, as every other command's -h does, not the flag
// package's raw dump; a bad flag or argument says how to get it.
func TestSandboxBuildImageHelp(t *testing.T) {
	var out, errOut strings.Builder
	if err := run(context.Background(), []string{"sandbox", "build-image", "-h"}, func(string) string { return "" }, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "Usage:\n") || !strings.Contains(out.String(), "switchboard sandbox build-image [--cache-dir DIR]") || strings.Contains(out.String()+errOut.String(), "Usage of") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
	for _, args := range [][]string{{"--bogus"}, {"extra"}} {
		err := run(context.Background(), append([]string{"sandbox", "build-image"}, args...), func(string) string { return "" }, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), "build-image -h") {
			t.Errorf("build-image %v: %v; want an error saying to run build-image -h", args, err)
		}
	}
}

// TestCLIConnectionRefused: the message names the URL and says what to do.
func TestCLIConnectionRefused(t *testing.T) {
	u := closedURL(t)
	for _, args := range [][]string{{"projects", "ls", "--url", u}, {"call", "echo", "--url", u}} {
		r := newCLI(t, map[string]string{"SWITCHBOARD_TOKEN": "sbt_never_printed"})
		err := r.fails(args...)
		var ue *unreachableError
		if !errors.As(err, &ue) || ue.URL != u {
			t.Fatalf("%v: got %T %v, want an unreachableError for %s", args, err, err, u)
		}
		for _, want := range []string{u, "connection refused", "--url", "SWITCHBOARD_URL"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q lacks %q", err, want)
			}
		}
		if strings.Contains(r.seen.String(), "sbt_never_printed") {
			t.Errorf("the token was printed")
		}
	}
}

// TestCLICallStreamed: `call` against the official SDK's streamable-HTTP
// server, which answers every request as an SSE stream, with progress
// notifications before the response.
func TestCLICallStreamed(t *testing.T) {
	ts := httptest.NewServer(mcptest.StreamableHandler(mcptest.Options{Name: "direct"}))
	t.Cleanup(ts.Close)
	r := newCLI(t, map[string]string{"SWITCHBOARD_URL": ts.URL})

	out := r.ok("call", "echo", `{"text": "streamed"}`)
	if got := resultText(t, out); got != "streamed" {
		t.Errorf("echo: %q", got)
	}

	out, errOut, err := r.run("", "call", "progress", `{"steps": 3}`, "--progress")
	if err != nil {
		t.Fatalf("progress: %v", err)
	}
	if got := resultText(t, out); got != "done" {
		t.Errorf("progress result %q", got)
	}
	if diff := cmp.Diff("progress 1/3: step 1/3\nprogress 2/3: step 2/3\nprogress 3/3: step 3/3\n", errOut); diff != "" {
		t.Errorf("progress lines (-want +got):\n%s", diff)
	}

	// Arguments from stdin, with a big integer that must stay exact.
	out, _, err = r.run(`{"kind": "a", "a": "x1"}`, "call", "exotic", "-")
	if err != nil {
		t.Fatalf("exotic: %v", err)
	}
	if !strings.Contains(out, mcptest.BigInt) {
		t.Errorf("big integer lost: %s", out)
	}

	err = r.fails("call", "rpc_error")
	var re *rpcError
	if !errors.As(err, &re) || re.Code != -32602 || !strings.Contains(string(re.Data), `"field"`) {
		t.Errorf("rpc_error: got %v, want JSON-RPC error -32602 with data", err)
	}

	out, _, err = r.run("", "call", "tool_error")
	var te *toolError
	if !errors.As(err, &te) || !strings.Contains(out, `"isError": true`) {
		t.Errorf("tool_error: got %v, stdout %s", err, out)
	}
}

// resultText is the first text content of a printed tools/call result.
func resultText(t *testing.T, out string) string {
	t.Helper()
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("not a tool result: %v\n%s", err, out)
	}
	return res.Content[0].Text
}

// TestCLIEndToEnd drives every command against a real gateway, with an
// admin token configured, as a user would.
func TestCLIEndToEnd(t *testing.T) {
	const admin = "admin-token-for-the-cli-test-0123456789"
	const secret = "s3cr3t-Value-42"
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}}, map[string]string{"MCP_SERVER_ADMIN_TOKEN": admin})
	r := newCLI(t, map[string]string{"SWITCHBOARD_URL": g.url, "SWITCHBOARD_TOKEN": admin})
	t.Cleanup(func() {
		if strings.Contains(r.seen.String(), admin) {
			t.Errorf("the admin token was printed")
		}
	})

	if !t.Run("projects", func(t *testing.T) {
		r.t = t
		out := r.ok("projects", "add", "p1", "--description", "CLI test")
		if !strings.Contains(out, "p1") || !strings.Contains(out, g.url+"/projects/p1/mcp") {
			t.Errorf("projects add printed:\n%s", out)
		}
		out = r.ok("projects", "ls")
		if !hasRow(out, "p1", g.url+"/projects/p1/mcp", "CLI test") || !hasRow(out, "default", g.url+"/mcp") {
			t.Errorf("projects ls:\n%s", out)
		}
		var ls struct {
			Projects []struct {
				ID     string `json:"id"`
				MCPURL string `json:"mcp_url"`
			} `json:"projects"`
		}
		decode(t, r.ok("projects", "ls", "--json"), &ls)
		ids := map[string]string{}
		for _, p := range ls.Projects {
			ids[p.ID] = p.MCPURL
		}
		if ids["p1"] != "/projects/p1/mcp" || ids["default"] != "/mcp" {
			t.Errorf("projects ls --json: %+v", ls)
		}
		var ae *apiError
		if err := r.fails("projects", "add", "p1"); !errors.As(err, &ae) || ae.Status != 409 || ae.Code != "conflict" {
			t.Errorf("duplicate project: got %v, want 409 conflict", err)
		}
		if err := r.fails("projects", "add", "Not Valid"); !errors.As(err, &ae) || ae.Status != 400 || ae.Message == "" {
			t.Errorf("invalid project id: got %v, want 400 with a message", err)
		}
	}) {
		return
	}

	if !t.Run("secrets", func(t *testing.T) {
		r.t = t
		// The value comes on stdin, with the newline echo adds.
		if out, errOut, err := r.run(secret+"\n", "secrets", "set", "API_KEY", "-p", "p1"); err != nil {
			t.Fatalf("secrets set: %v\n%s%s", err, out, errOut)
		}
		if out := r.ok("secrets", "ls", "-p", "p1"); !hasRow(out, "API_KEY") {
			t.Errorf("secrets ls:\n%s", out)
		}
		if out := r.ok("secrets", "ls", "-p", "p1", "--json"); !strings.Contains(out, `"API_KEY"`) {
			t.Errorf("secrets ls --json:\n%s", out)
		}
		r.ok("secrets", "set", "OTHER", "x", "-p", "p1")
		r.ok("secrets", "rm", "OTHER", "-p", "p1")
		if out := r.ok("secrets", "ls", "-p", "p1"); hasRow(out, "OTHER") {
			t.Errorf("removed secret still listed:\n%s", out)
		}
		if strings.Contains(r.seen.String(), secret) {
			t.Fatalf("the secret value was printed")
		}
	}) {
		return
	}

	if !t.Run("servers", func(t *testing.T) {
		r.t = t
		// The fixture as a stdio child; SB_SECRET comes from the project's
		// secret, resolved at connect time.
		out := r.ok("servers", "add", "fx", "-p", "p1", "--command", os.Args[0],
			"--env", mcptest.EnvFixture+"=stdio", "--env", mcptest.EnvFixtureName+"=fx",
			"--env", "SB_SECRET=${API_KEY}", "--description", "fixture")
		if !strings.Contains(out, "fx") {
			t.Errorf("servers add printed:\n%s", out)
		}
		// A remote one, disabled, from flags; --json prints the API's Server.
		var rem struct {
			Transport string `json:"transport"`
			Enabled   bool   `json:"enabled"`
			Config    struct {
				URL        string            `json:"url"`
				Headers    map[string]string `json:"headers"`
				ToolPrefix string            `json:"toolPrefix"`
			} `json:"config"`
		}
		decode(t, r.ok("servers", "add", "rem", "-p", "p1", "--url", closedURL(t)+"/mcp", "--transport", "streamable-http",
			"--header", "Authorization=Bearer ${API_KEY}", "--tool-prefix", "rem_", "--disabled", "--json"), &rem)
		if rem.Transport != "streamable-http" || rem.Enabled || rem.Config.Headers["Authorization"] != "Bearer ${API_KEY}" || rem.Config.ToolPrefix != "rem_" {
			t.Errorf("servers add rem --json: %+v", rem)
		}
		// --config verbatim.
		r.ok("servers", "add", "cfg", "-p", "p1", "--disabled", "--config", `{"command": "true", "args": ["a"], "callTimeout": "45s"}`)

		out = r.ok("servers", "ls", "-p", "p1")
		if !hasRow(out, "fx", "stdio") || !hasRow(out, "rem", "streamable-http", "disabled") || !hasRow(out, "cfg", "stdio", "disabled") {
			t.Errorf("servers ls:\n%s", out)
		}
		r.ok("servers", "rm", "cfg", "-p", "p1")
		r.ok("servers", "rm", "rem", "-p", "p1")
		var ae *apiError
		if err := r.fails("servers", "rm", "rem", "-p", "p1"); !errors.As(err, &ae) || ae.Status != 404 || ae.Code != "not_found" {
			t.Errorf("removing a missing server: got %v, want 404 not_found", err)
		}
		if out := r.ok("servers", "ls", "-p", "p1"); hasRow(out, "rem") || hasRow(out, "cfg") {
			t.Errorf("removed servers still listed:\n%s", out)
		}
	}) {
		return
	}

	if !t.Run("tools", func(t *testing.T) {
		r.t = t
		out := r.ok("tools", "ls", "-p", "p1")
		for _, tool := range []string{"echo", "exotic", "progress"} {
			if !hasRow(out, tool, "fx") {
				t.Errorf("tools ls lacks %s:\n%s", tool, out)
			}
		}
		if out := r.ok("tools", "ls"); !hasRow(out, "echo", "up") {
			t.Errorf("tools ls of the default project:\n%s", out)
		}
	}) {
		return
	}

	if !t.Run("call", func(t *testing.T) {
		r.t = t
		if got := resultText(t, r.ok("call", "echo", `{"text": "hi p1"}`, "-p", "p1")); got != "hi p1" {
			t.Errorf("echo in p1: %q", got)
		}
		if got := resultText(t, r.ok("call", "echo", `{"text": "hi default"}`)); got != "hi default" {
			t.Errorf("echo in default: %q", got)
		}
		var re *rpcError
		if err := r.fails("call", "no_such_tool", "-p", "p1"); !errors.As(err, &re) || re.Code != -32601 {
			t.Errorf("unknown tool: got %v, want JSON-RPC error -32601", err)
		} else if !strings.Contains(err.Error(), "-32601") {
			t.Errorf("the message %q does not show the code", err)
		}
		out, _, err := r.run("", "call", "tool_error", "-p", "p1")
		var te *toolError
		if !errors.As(err, &te) || !strings.Contains(out, `"isError": true`) {
			t.Errorf("tool_error: got %v, stdout %s", err, out)
		}
		out, errOut, err := r.run("", "call", "progress", `{"steps": 2}`, "--progress", "-p", "p1")
		if err != nil || resultText(t, out) != "done" || !strings.Contains(errOut, "progress 2/2") {
			t.Errorf("progress through the gateway: %v\nstdout %s\nstderr %s", err, out, errOut)
		}
		// The secret reached the child exactly, without the newline. The
		// env tool's output holds it, so it stays out of r.seen.
		rr := newCLI(t, r.env)
		env := resultText(t, rr.ok("call", "env", "-p", "p1"))
		if !strings.Contains("\n"+env+"\n", "\nSB_SECRET="+secret+"\n") {
			t.Errorf("SB_SECRET is not the secret set through stdin")
		}
	}) {
		return
	}

	if !t.Run("disable and enable", func(t *testing.T) {
		r.t = t
		if out := r.ok("servers", "disable", "fx", "-p", "p1"); !strings.Contains(out, "disabled") {
			t.Errorf("servers disable printed:\n%s", out)
		}
		if out := r.ok("servers", "ls", "-p", "p1"); !hasRow(out, "fx", "stdio", "disabled") {
			t.Errorf("servers ls after disable:\n%s", out)
		}
		if out := r.ok("tools", "ls", "-p", "p1"); hasRow(out, "echo") {
			t.Errorf("a disabled server's tools are listed:\n%s", out)
		}
		var re *rpcError
		if err := r.fails("call", "echo", `{"text": "x"}`, "-p", "p1"); !errors.As(err, &re) || re.Code != -32601 {
			t.Errorf("calling a disabled server's tool: got %v, want -32601", err)
		}
		r.ok("servers", "enable", "fx", "-p", "p1")
		if out := r.ok("servers", "ls", "-p", "p1"); hasRow(out, "fx", "stdio", "disabled") {
			t.Errorf("servers ls after enable:\n%s", out)
		}
		if got := resultText(t, r.ok("call", "echo", `{"text": "back"}`, "-p", "p1")); got != "back" {
			t.Errorf("echo after enable: %q", got)
		}
	}) {
		return
	}

	if !t.Run("tokens", func(t *testing.T) {
		r.t = t
		out, errOut, err := r.run("", "tokens", "create", "ci", "-p", "p1")
		if err != nil {
			t.Fatalf("tokens create: %v", err)
		}
		token := strings.TrimSpace(out)
		if !strings.HasPrefix(token, "sbt_") || strings.Contains(token, "\n") || !strings.Contains(errOut, "only") {
			t.Fatalf("tokens create: stdout %q, stderr %q", out, errOut)
		}
		var tokens struct {
			Tokens []apiclient.Token `json:"tokens"`
		}
		decode(t, r.ok("tokens", "ls", "-p", "p1", "--json"), &tokens)
		if len(tokens.Tokens) != 1 || tokens.Tokens[0].Name != "ci" || tokens.Tokens[0].Token != "" {
			t.Fatalf("tokens ls --json: %+v", tokens)
		}
		id := tokens.Tokens[0].ID
		if out := r.ok("tokens", "ls", "-p", "p1"); !hasRow(out, id, "ci") || !strings.HasSuffix(strings.TrimSpace(out), " -") || strings.Contains(out, token) {
			t.Errorf("tokens ls:\n%s", out)
		}
		// The project token reaches its project, over the API and MCP.
		if out := r.ok("servers", "ls", "-p", "p1", "--token", token); !hasRow(out, "fx") {
			t.Errorf("servers ls with the project token:\n%s", out)
		}
		if got := resultText(t, r.ok("call", "echo", `{"text": "tok"}`, "-p", "p1", "--token", token)); got != "tok" {
			t.Errorf("echo with the project token: %q", got)
		}
		var ae *apiError
		for _, args := range [][]string{
			{"servers", "ls", "-p", "default", "--token", token}, // another project
			{"tokens", "ls", "-p", "p1", "--token", token},       // admin only
		} {
			if err := r.fails(args...); !errors.As(err, &ae) || ae.Status != 403 {
				t.Errorf("%v: got %v, want 403", args, err)
			}
		}
		// A stdio server in its own project: the gateway's reason, and
		// nothing after it that says the token reached the wrong project.
		err = r.fails("servers", "add", "sh", "--command", "sh", "-p", "p1", "--token", token)
		if !errors.As(err, &ae) || ae.Status != 403 || !strings.Contains(ae.Message, "admin token") {
			t.Errorf("stdio server with the project token: got %v, want 403 naming the admin token", err)
		} else if strings.Contains(err.Error(), "own project") {
			t.Errorf("stdio server with the project token: the reason is contradicted: %v", err)
		}
		bad := "sbt_" + strings.Repeat("A", 43)
		err = r.fails("servers", "ls", "-p", "p1", "--token", bad)
		if !errors.As(err, &ae) || ae.Status != 401 || ae.Message == "" {
			t.Errorf("bad token: got %v, want 401 with the API's message", err)
		}
		if strings.Contains(err.Error(), bad) {
			t.Errorf("the error shows the token: %v", err)
		}
		noToken := newCLI(t, map[string]string{"SWITCHBOARD_URL": g.url})
		if err := noToken.fails("projects", "ls"); !errors.As(err, &ae) || ae.Status != 401 {
			t.Errorf("no token: got %v, want 401", err)
		}
		if err := noToken.fails("call", "echo", `{"text": "x"}`, "-p", "p1"); !errors.As(err, &ae) || ae.Status != 401 {
			t.Errorf("MCP without a token: got %v, want 401", err)
		}

		r.ok("tokens", "revoke", id, "-p", "p1")
		if out := r.ok("tokens", "ls", "-p", "p1"); !hasRow(out, id, "ci") || strings.HasSuffix(strings.TrimSpace(out), " -") {
			t.Errorf("tokens ls after revoke:\n%s", out)
		}
		if err := r.fails("servers", "ls", "-p", "p1", "--token", token); !errors.As(err, &ae) || ae.Status != 401 {
			t.Errorf("revoked token: got %v, want 401", err)
		}
	}) {
		return
	}

	if !t.Run("history", func(t *testing.T) {
		r.t = t
		// The call log is written in batches: ask until the last call made
		// (the third successful echo) is in.
		var h struct {
			Calls []struct {
				Server  string `json:"server"`
				Tool    string `json:"tool"`
				Outcome string `json:"outcome"`
			} `json:"calls"`
		}
		for deadline := time.Now().Add(20 * time.Second); ; {
			decode(t, r.ok("history", "-p", "p1", "--tool", "echo", "--outcome", "ok", "--json"), &h)
			if len(h.Calls) >= 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("history has %d of the 3 echo calls made", len(h.Calls))
			}
			time.Sleep(50 * time.Millisecond)
		}
		for _, c := range h.Calls {
			if c.Tool != "echo" || c.Outcome != "ok" || c.Server != "fx" {
				t.Errorf("history --tool echo --outcome ok has %+v", c)
			}
		}
		out := r.ok("history", "-p", "p1")
		for _, row := range [][]string{
			{"fx", "echo", "ok"},
			{"-", "no_such_tool", "error -32601"},
			{"-", "echo", "error -32601"}, // while disabled
			{"fx", "tool_error", "tool_error"},
			{"fx", "progress", "ok"},
		} {
			if !hasRow(out, row...) {
				t.Errorf("history lacks %q:\n%s", row, out)
			}
		}
		out, errOut, err := r.run("", "history", "-p", "p1", "--limit", "1")
		if err != nil || strings.Count(out, "\n") != 2 || !strings.Contains(errOut, "--cursor") {
			t.Errorf("history --limit 1: %v\nstdout %s\nstderr %s", err, out, errOut)
		}
		if out := r.ok("history"); !hasRow(out, "up", "echo", "ok") || hasRow(out, "fx") {
			t.Errorf("history of the default project:\n%s", out)
		}
	}) {
		return
	}

	if !t.Run("cleanup", func(t *testing.T) {
		r.t = t
		r.ok("servers", "rm", "fx", "-p", "p1")
		if out := r.ok("servers", "ls", "-p", "p1"); hasRow(out, "fx") {
			t.Errorf("removed server still listed:\n%s", out)
		}
		r.ok("projects", "rm", "p1")
		if out := r.ok("projects", "ls"); hasRow(out, "p1") {
			t.Errorf("removed project still listed:\n%s", out)
		}
		var ae *apiError
		if err := r.fails("projects", "rm", "default"); !errors.As(err, &ae) || ae.Status != 409 {
			t.Errorf("removing the default project: got %v, want 409", err)
		}
	}) {
		return
	}

	if strings.Contains(r.seen.String(), secret) {
		t.Errorf("the secret value was printed")
	}
}

// hasRow reports whether a table has a row holding cells in order, each
// as whole words ("error -32601" matches two columns).
func hasRow(table string, cells ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		rest := " " + strings.Join(strings.Fields(line), " ") + " "
		ok := true
		for _, c := range cells {
			i := strings.Index(rest, " "+c+" ")
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(c)+1:]
		}
		if ok && len(cells) > 0 {
			return true
		}
	}
	return false
}

func decode(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
}

// TestPullBar: the progress line of `hosted add` while an image is pulled.
func TestPullBar(t *testing.T) {
	for _, c := range []struct {
		p    switchboard.PullProgress
		want string
	}{
		{switchboard.PullProgress{Image: "r/x:1", Layers: 4, LayersDone: 1, Bytes: 5 << 20, TotalBytes: 20 << 20, Status: "Downloading"}, "pulling r/x:1 [##--------] 1 of 4 layers, 5.0 of 20.0 MiB Downloading   "},
		{switchboard.PullProgress{Image: "r/x:1", Layers: 2, LayersDone: 2}, "pulling r/x:1 [##########] 2 of 2 layers   "},
		{switchboard.PullProgress{Image: "r/x:1", Status: "starting"}, "pulling r/x:1 [----------] resolving the image starting   "},
	} {
		if got := pullBar(c.p, 10); got != c.want {
			t.Errorf("pullBar(%+v) = %q, want %q", c.p, got, c.want)
		}
	}
}

// TestHostedProblem: `hosted ls` shows a server that crashed and was
// restarted as the console does, not as a server without a problem
// (issue 34, item 16); a warning or an error comes first.
func TestHostedProblem(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	crash := &switchboard.HostedCrash{At: now.Add(-90 * time.Second), ExitCode: 137, OOMKilled: true}
	for _, tc := range []struct {
		s    switchboard.HostedStatus
		want string
	}{
		{switchboard.HostedStatus{Status: "running"}, ""},
		{switchboard.HostedStatus{Status: "running", LastCrash: crash, CrashCount: 1}, "crashed 1m30s ago (exit 137, out of memory)"},
		{switchboard.HostedStatus{Status: "backoff", LastCrash: crash, CrashCount: 3}, "crashed 1m30s ago (exit 137, out of memory; 3 crashes)"},
		{switchboard.HostedStatus{Status: "failed", LastError: "image gone\nmore", LastCrash: crash}, "image gone"},
		{switchboard.HostedStatus{Status: "running", Warning: "runtime runsc not used", LastCrash: crash}, "runtime runsc not used"},
	} {
		if got := hostedProblem(tc.s, now); got != tc.want {
			t.Errorf("hostedProblem(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
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
			if err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut, nil); err != nil {
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

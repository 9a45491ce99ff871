package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/pgtest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
	"github.com/switchboard-mcp/switchboard/store/postgres"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

// secretValue is a random value no test input or log line holds by chance.
func secretValue(t testing.TB) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "sv-" + hex.EncodeToString(b)
}

// TestSecrets, on both stores: a secret set through the API reaches a
// server as `${NAME}` in its env (the fixture's env tool returns it) and
// nothing else: no API response, no log line, no row in the database holds
// the value in plaintext. A missing secret shows in the server's status,
// naming the variable and the server.
func TestSecrets(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken}
			if kind == "postgres" {
				env["MCP_SERVER_DATABASE_URL"] = pgtest.NewDB(t)
			}
			testSecrets(t, startGateway(t, nil, env), env["MCP_SERVER_DATABASE_URL"])
		})
	}
}

func testSecrets(t *testing.T, g *gateway, dsn string) {
	api := newAPI(t, g.url, adminToken)
	value, value2 := secretValue(t), secretValue(t)
	api.createProject("vault")
	api.putSecret("vault", "API_KEY", value)
	api.createServer("vault", "keeper", fixture("keeper", map[string]string{"API_KEY": "${API_KEY}", "WRAPPED": "key=${API_KEY};"}))
	api.createServer("vault", "needy", fixture("needy", map[string]string{"X": "${MISSING_SECRET}"}, "toolPrefix", "needy_"))
	// A command built from the secret fails to start: the error quotes
	// the path, so the secret must be redacted from status and logs.
	api.createServer("vault", "leaky", map[string]any{"command": "/nonexistent/${API_KEY}/bin", "toolPrefix": "leaky_"})
	// A remote server that gets the secret in a header and quotes it in
	// its error, as APIs that reject a key often do.
	api.createServer("vault", "remote", map[string]any{"url": keyQuotingUpstream(t), "headers": map[string]string{"X-Api-Key": "${API_KEY}"}, "toolPrefix": "remote_"})

	cs, _ := openMCP(t, g.url+"/projects/vault/mcp", adminToken)
	names := toolNames(t, cs) // connects every server
	if !has(names, "env") || has(names, "needy_echo") || has(names, "leaky_echo") {
		t.Fatalf("tools: %v", names)
	}
	out := callText(t, cs, "env", nil)
	if !strings.Contains("\n"+out, "\nAPI_KEY="+value+"\n") || !strings.Contains(out, "WRAPPED=key="+value+";") {
		t.Fatalf("the server did not get the secret; its environment:\n%s", out)
	}

	// A client passing the secret under an innocent name: the call log
	// keeps the call, not the value.
	callText(t, cs, "echo", map[string]any{"text": "copy of " + value})
	logged := api.waitCalls("vault", "?tool=echo", 1)
	var args bytes.Buffer
	if err := json.Compact(&args, logged[0].Arguments); err != nil || args.String() != `{"text":"copy of [redacted]"}` {
		t.Errorf("logged arguments %s, want the secret value redacted", logged[0].Arguments)
	}

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "remote_check_key", Arguments: map[string]any{}})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Message != "invalid API key "+value {
		t.Fatalf("remote_check_key: %v, want the upstream's error quoting the key", err)
	}

	needy := api.getServer("vault", "needy")
	if needy.Status == nil || needy.Status.State != "invalid" ||
		!strings.Contains(needy.Status.LastError, "MISSING_SECRET") || !strings.Contains(needy.Status.LastError, `"needy"`) {
		t.Errorf("status of a server missing a secret: %+v", needy.Status)
	}
	leaky := api.getServer("vault", "leaky")
	if leaky.Status == nil || leaky.Status.LastError == "" || leaky.Status.State == "ready" {
		t.Fatalf("status of a server that cannot start: %+v", leaky.Status)
	}
	var list struct {
		Secrets []struct{ Name string }
	}
	api.must(http.StatusOK, "GET", "/api/v1/projects/vault/secrets", nil, &list)
	if len(list.Secrets) != 1 || list.Secrets[0].Name != "API_KEY" {
		t.Errorf("secrets: %+v", list.Secrets)
	}
	// Every other read of the project, for the grep below.
	for _, p := range []string{"/servers", "/status", "/tools", "/tool-calls", ""} {
		api.must(http.StatusOK, "GET", "/api/v1/projects/vault"+p, nil, nil)
	}
	api.fails(http.StatusBadRequest, "invalid", "PUT", "/api/v1/projects/vault/secrets/1BAD", map[string]any{"value": "v"})
	api.fails(http.StatusBadRequest, "invalid", "PUT", "/api/v1/projects/vault/secrets/EMPTY", map[string]any{"value": ""})
	api.fails(http.StatusNotFound, "not_found", "PUT", "/api/v1/projects/nope/secrets/X", map[string]any{"value": "v"})

	t.Run("a new value reconnects the servers that use it", func(t *testing.T) {
		api := api.on(t)
		api.putSecret("vault", "API_KEY", value2)
		if out := callText(t, cs, "env", nil); !strings.Contains("\n"+out, "\nAPI_KEY="+value2+"\n") {
			t.Fatalf("after the secret changed, the server's environment:\n%s", out)
		}
		api.must(http.StatusOK, "GET", "/api/v1/projects/vault/servers", nil, nil)
	})

	t.Run("the database holds no plaintext", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		var st switchboard.Store
		var err error
		if dsn != "" {
			st, err = postgres.Open(ctx, dsn)
		} else {
			st, err = sqlite.Open(ctx, g.dataDir)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		sec, err := st.GetSecret(ctx, "vault", "API_KEY")
		if err != nil {
			t.Fatal(err)
		}
		if len(sec.Ciphertext) == 0 || bytes.Contains(sec.Ciphertext, []byte(value2)) || bytes.Contains(sec.Ciphertext, []byte(value)) {
			t.Errorf("the stored secret is empty or holds the value in plaintext")
		}
		rec, err := st.GetServer(ctx, "vault", "keeper")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(rec.Config, []byte("${API_KEY}")) {
			t.Errorf("the server row lost its reference: %s", rec.Config)
		}
		if dsn != "" {
			checkPostgresDump(t, dsn, value, value2)
		}
	})

	t.Run("a deleted secret leaves the server invalid, naming it", func(t *testing.T) {
		api := api.on(t)
		api.must(http.StatusNoContent, "DELETE", "/api/v1/projects/vault/secrets/API_KEY", nil, nil)
		keeper := api.getServer("vault", "keeper")
		if keeper.Status == nil || keeper.Status.State != "invalid" || !strings.Contains(keeper.Status.LastError, "API_KEY") {
			t.Errorf("keeper without its secret: %+v", keeper.Status)
		}
	})

	// The tool result above is the only place the values may appear.
	g.stop(t) // the log is complete
	for _, v := range []string{value, value2} {
		if strings.Contains(api.seen.String(), v) {
			t.Errorf("a secret value is in an API response:\n%s", api.seen.String())
		}
		if strings.Contains(g.logs.String(), v) {
			t.Errorf("a secret value is in the gateway log")
		}
	}
	// The failing command was reported and logged, redacted: the checks
	// above had something to find.
	if !strings.Contains(leaky.Status.LastError, "/nonexistent/[redacted]/bin") || !strings.Contains(g.logs.String(), "/nonexistent/[redacted]/bin") {
		t.Errorf("the failing command is not in the status (%q) and the log with the secret redacted", leaky.Status.LastError)
	}
	// The upstream's error is logged by the project's edge, with the
	// project's secrets redacted (it once went through the default
	// project's logger, naming project "default" and redacting nothing).
	if !regexp.MustCompile(`msg="tool call failed" project=vault .*invalid API key \[redacted\]`).MatchString(g.logs.String()) {
		t.Errorf("no redacted \"tool call failed\" line of project vault in the log")
	}
	if dsn == "" {
		checkFilesHold(t, g.dataDir, value, value2)
	}
}

// keyQuotingUpstream serves, over streamable HTTP, an MCP server whose
// one tool, check_key, fails with a JSON-RPC error that quotes the
// X-Api-Key header it was sent. It returns the server's URL.
func keyQuotingUpstream(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "key-quoting", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "check_key", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: -32001, Message: "invalid API key " + req.Extra.Header.Get("X-Api-Key")}
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// checkFilesHold fails if any file under dir (the SQLite database, its
// WAL, the key file) holds one of values.
func checkFilesHold(t *testing.T, dir string, values ...string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		for _, v := range values {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds a secret value in plaintext", path)
			}
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("reading the data dir: %v (%d files)", err, n)
	}
}

// checkPostgresDump reads every row of every table as text and fails if
// one holds one of values.
func checkPostgresDump(t *testing.T, dsn string, values ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) FROM information_schema.tables
		WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) == 0 {
		t.Fatalf("listing tables: %v %v", tables, err)
	}
	for _, tbl := range tables {
		rows, err := conn.Query(ctx, "SELECT t::text FROM "+tbl+" t")
		if err != nil {
			t.Fatal(err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range texts {
			for _, v := range values {
				if strings.Contains(row, v) {
					t.Errorf("table %s holds a secret value in plaintext", tbl)
				}
			}
		}
	}
}

// A gateway started with another MCP_SERVER_SECRET_KEY than the one its
// store's secrets were sealed with refuses to start, saying why, instead
// of serving every server that needs a secret as "missing variable".
func TestStartRefusesAnotherSecretKey(t *testing.T) {
	key1, key2 := strings.Repeat("1", 64), strings.Repeat("2", 64)
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken, "MCP_SERVER_SECRET_KEY": key1})
	api := newAPI(t, g.url, adminToken)
	api.createProject("vault")
	api.putSecret("vault", "API_KEY", secretValue(t))
	g.stop(t)

	vars := map[string]string{"MCP_SERVER_SANDBOX": "false", "MCP_SERVER_PORT": "0", "MCP_SERVER_DATA_DIR": g.dataDir, "MCP_SERVER_SECRET_KEY": key2}
	var logs testenv.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	err := run(ctx, nil, func(k string) string { return vars[k] }, io.Discard, &logs)
	if err == nil || !strings.Contains(err.Error(), "MCP_SERVER_SECRET_KEY: none of the 1 stored secrets decrypts") {
		t.Fatalf("start with another key: %v, want a refusal naming MCP_SERVER_SECRET_KEY", err)
	}
	if strings.Contains(err.Error(), key2) || strings.Contains(err.Error(), key1) {
		t.Fatalf("the refusal quotes a key: %v", err)
	}
}

// A gateway started on a data directory and key file that group and
// others can read (an older version's, a restored backup, a hand-made
// directory) makes both owner-only and says so, as it does for the
// database files; a shared sticky directory (/tmp) is refused, not taken.
func TestStartRestrictsDataDirAndKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("3", 64)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Chmod, not the create modes: the umask would narrow those.
	for p, mode := range map[string]os.FileMode{dir: 0o755, key: 0o644} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_DATA_DIR": dir})
	g.stop(t)
	for p, want := range map[string]os.FileMode{dir: 0o700, key: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o after start, want %04o", filepath.Base(p), got, want)
		}
	}
	logs := g.logs.String()
	for _, want := range []string{"data directory was accessible to group or others", "(mode 0644); restricted it to 0600"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}

	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"MCP_SERVER_SANDBOX": "false", "MCP_SERVER_PORT": "0", "MCP_SERVER_DATA_DIR": shared}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	err := run(ctx, nil, func(k string) string { return vars[k] }, io.Discard, io.Discard)
	if !errors.Is(err, switchboard.ErrConfig) || !strings.Contains(err.Error(), "sticky") {
		t.Errorf("start on a sticky directory: %v, want ErrConfig naming the sticky bit", err)
	}
	if fi, err := os.Stat(shared); err != nil {
		t.Error(err)
	} else if fi.Mode() != os.ModeDir|os.ModeSticky|0o777 {
		t.Errorf("the shared directory's mode is %v after the refusal, want it unchanged", fi.Mode())
	}
}

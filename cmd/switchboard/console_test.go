package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestConsoleInBrowser drives the operator console in a real headless
// Chromium (Debian's chromium package) against a gateway started by run:
// log in, see a failing and a healthy server, try a tool, find the call
// in the history and the chart, add and delete a server, create a project
// token (shown once) and get the 403 page for another project with it.
// With SWITCHBOARD_SCREENSHOTS=dir it writes a screenshot of each page
// there.
func TestConsoleInBrowser(t *testing.T) {
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	testenv.Need(t, "chromium", browser != "", "no chromium on PATH (apt-get install chromium)")
	shots := os.Getenv("SWITCHBOARD_SCREENSHOTS")
	if shots != "" {
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	const admin = "console-admin-token-0123456789"
	g := startGateway(t, [][2]any{
		{"healthy", stdioServer("healthy")},
		{"broken", map[string]any{"command": filepath.Join(t.TempDir(), "no-such-server")}},
	}, map[string]string{"MCP_SERVER_ADMIN_TOKEN": admin})
	for _, id := range []string{"team", "other"} {
		consoleAPI(t, g.url, admin, http.MethodPost, "/api/v1/projects", `{"id":"`+id+`"}`, http.StatusCreated)
	}

	actx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1366, 900))...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	fail := func(what string, err error) {
		t.Helper()
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("%s: %v\nat %s:\n%s", what, err, loc, body)
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			fail(what, err)
		}
	}
	read := func(what string, a chromedp.Action[string]) string {
		t.Helper()
		v, err := chromedp.Run(ctx, a)
		if err != nil {
			fail(what, err)
		}
		return v
	}
	shot := func(name string) {
		t.Helper()
		if shots == "" {
			return
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			fail("screenshot "+name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s", filepath.Join(shots, name+".png"))
	}
	scheme := func(v string) {
		t.Helper()
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}}}); err != nil {
			fail("color scheme "+v, err)
		}
	}
	var text string
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }

	// Log in with the admin token.
	step("open the console", chromedp.Navigate(g.url+"/ui/"), chromedp.WaitVisible(css("#token")))
	shot("1-login")
	step("log in", chromedp.SendKeys(css("#token"), admin), chromedp.Click(css(`form[action="/ui/login"] button`)),
		chromedp.WaitVisible(css(`#p-default`)))
	// With JavaScript the overview re-reads itself in the background and
	// swaps its <main> in (every 10 s): a mark on the old content goes.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("main h1").dataset.old = "1"; true`)); err != nil {
		fail("mark the overview", err)
	}
	step("background refresh", chromedp.WaitVisible(css(`main h1:not([data-old])`)))

	// Tools (listing connects both servers), try echo.
	step("tools", chromedp.Navigate(g.url+"/ui/p/default/tools"), chromedp.WaitVisible(css(`#tool-echo`)))
	step("try echo", chromedp.Click(css(`#tool-echo details.try summary`)),
		chromedp.SendKeys(css(`#f-echo-text`), "hello from the console"),
		chromedp.Click(css(`#tool-echo details.try button[type=submit]`)),
		chromedp.WaitVisible(css(`#tool-echo .result pre.text`)))
	if text = read("echo result", chromedp.Text(css(`#tool-echo .result pre.text`))); text != "hello from the console" {
		t.Errorf("echo result %q", text)
	}
	// The text wraps only between words and the whole result keeps its
	// indentation on unwrapped lines, scrolling: both wrapped mid-word.
	style := `(() => { const s = q => { const c = getComputedStyle(document.querySelector(q));
		return [c.whiteSpace, c.wordBreak, c.overflowWrap, c.overflowX].join(" ") };
		return s("#tool-echo .result pre.text") + " | " + s("#tool-echo .result pre.json") })()`
	if got, want := read("result styles", chromedp.Evaluate[string](style)), "pre-wrap normal normal auto | pre normal normal auto"; got != want {
		t.Errorf("try-it result styles (white-space, word-break, overflow-wrap, overflow-x of text | whole result) = %q, want %q", got, want)
	}
	shot("3-tools")

	// Overview: one healthy, one failing server.
	step("overview", chromedp.Navigate(g.url+"/ui/p/default/?refresh=off"),
		chromedp.WaitVisible(css(`tr[data-server="healthy"][data-state="ready"]`)),
		chromedp.WaitVisible(css(`tr[data-server="broken"] .state.bad`)))
	if text = read("broken error", chromedp.Text(css(`tr[data-server="broken"] td.err`))); strings.TrimSpace(text) == "" {
		t.Errorf("the failing server shows no error")
	}
	step("all projects", chromedp.Navigate(g.url+"/ui/?refresh=off"), chromedp.WaitVisible(css(`#p-other`)))
	shot("2-overview")
	scheme("dark")
	step("dark", chromedp.Reload(), chromedp.WaitVisible(css(`#p-other`)))
	shot("2-overview-dark")
	scheme("light")

	// Calls: the echo call in the history and in the healthy server's chart.
	step("calls", chromedp.Navigate(g.url+"/ui/p/default/calls?window=15m"),
		chromedp.WaitVisible(css(`tr[data-tool="echo"][data-outcome="ok"]`)),
		chromedp.WaitVisible(css(`figure.chart[data-server="healthy"] svg.latency circle.dot`)),
		chromedp.WaitVisible(css(`figure.chart[data-server="healthy"] svg.errors rect`)))
	shot("4-calls")

	// Manage: add a server, then delete it.
	step("manage", chromedp.Navigate(g.url+"/ui/p/default/manage"), chromedp.WaitVisible(css(`#new-name`)))
	step("add a server", chromedp.SendKeys(css(`#new-name`), "extra"),
		chromedp.SendKeys(css(`#new-url`), "http://127.0.0.1:9/mcp"),
		chromedp.Click(css(`form[action$="/server-create"] button`)),
		chromedp.WaitVisible(css(`tr[data-server="extra"]`)))
	if text = read("flash", chromedp.Text(css(`.flash.ok`))); text != "Server added." {
		t.Errorf("after adding: flash %q", text)
	}
	shot("5-manage")
	step("delete it", chromedp.Click(css(`tr[data-server="extra"] details.delete summary`)),
		chromedp.Click(css(`tr[data-server="extra"] details.delete button`)),
		chromedp.WaitNotPresent(css(`tr[data-server="extra"]`)))
	if text = read("flash", chromedp.Text(css(`.flash.ok`))); text != "Server deleted." {
		t.Errorf("after deleting: flash %q", text)
	}
	consoleAPI(t, g.url, admin, http.MethodGet, "/api/v1/projects/default/servers/extra", "", http.StatusNotFound)

	// Hosted servers (none registered here; the page lists them or says
	// the gateway runs none).
	step("hosted", chromedp.Navigate(g.url+"/ui/p/default/hosted"), chromedp.WaitVisible(css(`main h1`)))
	shot("7-hosted")
	step("sandbox", chromedp.Navigate(g.url+"/ui/p/default/sandbox"), chromedp.WaitVisible(css(`main h1`)))
	shot("8-sandbox")

	// A token for project team, shown once; with it, project other is 403.
	step("create a token", chromedp.Navigate(g.url+"/ui/p/team/manage"),
		chromedp.SendKeys(css(`#tok-name`), "browser"),
		chromedp.Click(css(`form[action$="/token-create"] button`)),
		chromedp.WaitVisible(css(`#newtoken`)))
	token := read("new token", chromedp.Value(css(`#newtoken`)))
	if !strings.HasPrefix(token, "sbt_") {
		t.Fatalf("new token %q", token)
	}
	step("log out", chromedp.Click(css(`form[action="/ui/logout"] button`)), chromedp.WaitVisible(css("#token")))
	step("log in with the project token", chromedp.SendKeys(css("#token"), token), chromedp.SendKeys(css("#project"), "team"),
		chromedp.Click(css(`form[action="/ui/login"] button`)), chromedp.WaitVisible(css(`#p-team`)))
	step("another project", chromedp.Navigate(g.url+"/ui/p/other/"), chromedp.WaitVisible(css(`#errh`)))
	if text = read("403 page", chromedp.Text(css(`#errh`))); text != "403 Forbidden" {
		t.Errorf("another project with a project token: %q, want the 403 page", text)
	}
	shot("6-forbidden")
}

// consoleAPI sends one admin API request and checks its status.
func consoleAPI(t *testing.T, base, token, method, path, body string, want int) json.RawMessage {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, out)
	}
	return out
}

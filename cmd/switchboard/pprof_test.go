package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// MCP_SERVER_PPROF_ADDR serves the runtime profiles on a listener of its
// own; the gateway's own port does not serve them.
func TestPprofListener(t *testing.T) {
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_PPROF_ADDR": "127.0.0.1:0"})
	m := regexp.MustCompile(`msg="serving runtime profiles" addr=(\S+)`).FindStringSubmatch(g.logs.String())
	if m == nil {
		t.Fatalf("no profile listener logged:\n%s", g.logs.String())
	}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := get("http://" + m[1] + "/debug/pprof/cmdline"); status != http.StatusOK || body == "" {
		t.Errorf("cmdline profile: %d %q", status, body)
	}
	if status, body := get("http://" + m[1] + "/debug/pprof/"); status != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("profile index: %d %.200q", status, body)
	}
	if status, _ := get(g.url + "/debug/pprof/"); status == http.StatusOK {
		t.Errorf("the gateway's own port serves profiles")
	}
}

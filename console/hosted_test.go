package console_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchboard-mcp/switchboard"
)

// fakeHosted is a working in-memory hosted service (the real one needs a
// Docker engine): registrations become running servers.
type fakeHosted struct {
	mu      sync.Mutex
	servers map[string]switchboard.HostedStatus // project/name
	deleted []string
}

func (f *fakeHosted) Register(ctx context.Context, project string, reg switchboard.HostedRegistration) (switchboard.HostedStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if reg.Name == "" || reg.Image == "" {
		return switchboard.HostedStatus{}, switchboard.Errorf(switchboard.ErrInvalid, "name and image are required")
	}
	started := time.Now().Add(-42 * time.Second)
	st := switchboard.HostedStatus{ID: "h-" + reg.Name, Project: project, Name: reg.Name, Image: reg.Image, Status: switchboard.HostedRunning,
		StartedAt: &started, UptimeSeconds: 42, Usage: &switchboard.HostedUsage{CPUPercent: 20, MemoryBytes: 12 << 20}}
	f.servers[project+"/"+reg.Name] = st
	return st, nil
}

func (f *fakeHosted) List(ctx context.Context, project string) ([]switchboard.HostedStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []switchboard.HostedStatus
	for _, s := range f.servers {
		if s.Project == project {
			s.Usage = nil // as hosted.Service.List: only Get samples the engine
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b switchboard.HostedStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (f *fakeHosted) Get(ctx context.Context, project, ref string) (switchboard.HostedStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.servers[project+"/"+ref]; ok {
		return s, nil
	}
	return switchboard.HostedStatus{}, switchboard.Errorf(switchboard.ErrNotFound, "hosted server not found")
}

func (f *fakeHosted) Restart(ctx context.Context, project, ref string) (switchboard.HostedStatus, error) {
	s, err := f.Get(ctx, project, ref)
	if err != nil {
		return s, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s.RestartCount++
	f.servers[project+"/"+ref] = s
	return s, nil
}

func (f *fakeHosted) Delete(ctx context.Context, project, ref string, keepVolumes bool) error {
	if _, err := f.Get(ctx, project, ref); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.servers, project+"/"+ref)
	f.deleted = append(f.deleted, ref+map[bool]string{true: " (volumes kept)", false: ""}[keepVolumes])
	return nil
}

func (f *fakeHosted) Logs(ctx context.Context, project, ref string, lines int) (string, error) {
	if _, err := f.Get(ctx, project, ref); err != nil {
		return "", err
	}
	return "listening on stdio\n<b>not markup</b>\n", nil
}

func (f *fakeHosted) Call(ctx context.Context, project, ref, method string, params json.RawMessage) (json.RawMessage, error) {
	return nil, switchboard.Errorf(switchboard.ErrUnavailable, "not in the fake")
}

func TestHostedPage(t *testing.T) {
	f := &fakeHosted{servers: map[string]switchboard.HostedStatus{}}
	g := newGateway(t, adminToken, f)
	b := g.browser(t)
	b.login(adminToken, "")
	tok := b.csrf("/ui/p/a/hosted")
	p := b.post("/ui/p/a/hosted/hosted-register", url.Values{"csrf": {tok}, "name": {"notes"}, "image": {"example/notes:1"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/p/a/hosted?done=hosted-register" {
		t.Fatalf("register: %d to %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	p = b.get("/ui/p/a/hosted?logs=notes")
	for _, want := range []string{`data-hosted="notes" data-status="running"`, "example/notes:1", "0.20", "12.0 MiB", "&lt;b&gt;not markup&lt;/b&gt;"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("hosted page lacks %q", want)
		}
	}
	// A server pulling its image shows how far the pull is.
	f.mu.Lock()
	f.servers["a/pulled"] = switchboard.HostedStatus{ID: "h-pulled", Project: "a", Name: "pulled", Image: "reg:5000/x:1", Status: switchboard.HostedPulling,
		Pull: &switchboard.PullProgress{Image: "reg:5000/x:1", Status: "Downloading", Layers: 3, LayersDone: 1, Bytes: 5 << 20, TotalBytes: 20 << 20}}
	f.mu.Unlock()
	p = b.get("/ui/p/a/hosted")
	if want := `pulling: 1 of 3 layers, 5.0 MiB of 20.0 MiB`; !strings.Contains(p.body, want) || !strings.Contains(p.body, `data-status="pulling"`) {
		t.Errorf("hosted page lacks the pull's progress %q", want)
	}
	f.mu.Lock()
	delete(f.servers, "a/pulled")
	f.mu.Unlock()
	if p := b.post("/ui/p/a/hosted/hosted-restart", url.Values{"csrf": {tok}, "name": {"notes"}}); p.status != http.StatusSeeOther {
		t.Errorf("restart: %d", p.status)
	}
	if s, _ := f.Get(context.Background(), "a", "notes"); s.RestartCount != 1 {
		t.Errorf("restart count %d, want 1", s.RestartCount)
	}
	if p := b.post("/ui/p/a/hosted/hosted-register", url.Values{"csrf": {tok}, "registration": {`{"name": "x"}`}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, "name and image are required") {
		t.Errorf("bad registration: %d, want 400 with the service's reason", p.status)
	}
	if p := b.post("/ui/p/a/hosted/hosted-delete", url.Values{"csrf": {tok}, "name": {"notes"}, "keep_volumes": {"on"}}); p.status != http.StatusSeeOther {
		t.Errorf("delete: %d", p.status)
	}
	if len(f.deleted) != 1 || f.deleted[0] != "notes (volumes kept)" {
		t.Errorf("deleted %v", f.deleted)
	}

	// A project token reaches its own project's list, but managing
	// containers is the admin's; another project's page is 403.
	pt := g.browser(t)
	pt.login(g.projectToken(t, "b"), "b")
	if p := pt.get("/ui/p/b/hosted"); p.status != http.StatusOK {
		t.Errorf("project token, own hosted page: %d", p.status)
	}
	if p := pt.post("/ui/p/b/hosted/hosted-register", url.Values{"csrf": {pt.csrf("/ui/p/b/hosted")}, "name": {"n"}, "image": {"i"}}); p.status != http.StatusForbidden {
		t.Errorf("project token registering: %d, want 403", p.status)
	}
	if p := pt.get("/ui/p/a/hosted"); p.status != http.StatusForbidden {
		t.Errorf("project token, another project's hosted page: %d, want 403", p.status)
	}
}

// TestHostedOff: a gateway without hosted servers says so on the page.
func TestHostedOff(t *testing.T) {
	g := newGateway(t, "")
	p := g.browser(t).get("/ui/p/a/hosted")
	if p.status != http.StatusOK || !strings.Contains(p.body, "hosted servers are not enabled on this gateway") {
		t.Errorf("hosted page without hosted servers: %d", p.status)
	}
}

// TestHostedUsage: the page shows each live server's CPU and memory use
// beside its limits (the API's list carries none; the page reads each
// server), and says plainly when usage is unknown or the server is not
// running, instead of a bare "of 0.5 cores".
func TestHostedUsage(t *testing.T) {
	started := time.Now().Add(-time.Minute)
	lim := switchboard.HostedEffectiveLimits{CPU: 0.5, MemoryBytes: 256 << 20}
	f := &fakeHosted{servers: map[string]switchboard.HostedStatus{
		"a/busy": {Project: "a", Name: "busy", Status: switchboard.HostedRunning, StartedAt: &started, Limits: lim,
			Usage: &switchboard.HostedUsage{CPUPercent: 25, MemoryBytes: 40 << 20}},
		"a/mute": {Project: "a", Name: "mute", Status: switchboard.HostedRunning, StartedAt: &started, Limits: lim},
		"a/off":  {Project: "a", Name: "off", Status: switchboard.HostedStopped, Limits: lim},
		"a/free": {Project: "a", Name: "free", Status: switchboard.HostedRunning, StartedAt: &started,
			Usage: &switchboard.HostedUsage{CPUPercent: 0.5, MemoryBytes: 3 << 20}},
	}}
	g := newGateway(t, adminToken, f)
	b := g.browser(t)
	b.login(adminToken, "")
	p := b.get("/ui/p/a/hosted")
	if p.status != http.StatusOK {
		t.Fatalf("hosted page: %d", p.status)
	}
	cell := regexp.MustCompile(`(?s)<td class="num usage">(.*?)</td>`)
	tag := regexp.MustCompile(`<[^>]*>`)
	got := map[string][]string{}
	for _, name := range []string{"busy", "mute", "off", "free"} {
		i := strings.Index(p.body, `data-hosted="`+name+`"`)
		if i < 0 {
			t.Fatalf("no row for %s", name)
		}
		row := p.body[i:]
		row = row[:strings.Index(row, "</tr>")]
		for _, m := range cell.FindAllStringSubmatch(row, -1) {
			got[name] = append(got[name], html.UnescapeString(strings.Join(strings.Fields(tag.ReplaceAllString(m[1], "")), " ")))
		}
	}
	want := map[string][]string{
		"busy": {"0.25 of 0.5 cores", "40.0 MiB of 256.0 MiB"},
		"mute": {"usage unknown; limit 0.5 cores", "usage unknown; limit 256.0 MiB"},
		"off":  {"not running; limit 0.5 cores", "not running; limit 256.0 MiB"},
		"free": {"<0.01 cores, no limit", "3.0 MiB, no limit"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("CPU and memory cells (-want +got):\n%s", d)
	}
}

package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// hostedView is a hosted server as the Hosted page shows it.
type hostedView struct{ switchboard.HostedStatus }

// Live reports a container that runs, whose usage the engine can give.
func (h hostedView) Live() bool {
	return h.StartedAt != nil && (h.Status == "running" || h.Status == "starting" || h.Status == "unresponsive")
}

// coresLabel writes a CPU figure (percent of one core, as docker stats
// gives it) in cores, the unit of the limit it stands beside.
func coresLabel(percent float64) string {
	c := percent / 100
	switch {
	case c <= 0:
		return "0"
	case c < 0.01:
		return "<0.01"
	}
	return strconv.FormatFloat(c, 'f', 2, 64)
}

// usageTimeout bounds one server's usage read (the engine samples for
// about a second), so a slow engine delays the page by that at most.
const usageTimeout = 8 * time.Second

// addUsage reads the usage of each live server of project p, which the
// API's list leaves out (its per-server read samples the engine), a few
// at a time. A server whose read fails or carries no figures keeps a nil
// Usage, which the page shows as unknown.
func (c *Console) addUsage(r *http.Request, p string, servers []hostedView) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range servers {
		if !servers[i].Live() || servers[i].Usage != nil {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(r.Context(), usageTimeout)
			defer cancel()
			if one, err := c.api(r).HostedServer(ctx, p, servers[i].Name); err == nil {
				servers[i].Usage = one.Usage
			}
		})
	}
	wg.Wait()
}

// Uptime is the container's uptime, rounded for reading.
func (h hostedView) Uptime() string {
	if h.UptimeSeconds <= 0 {
		return ""
	}
	return (time.Duration(h.UptimeSeconds) * time.Second).String()
}

// bytesLabel writes a byte count in binary units.
func bytesLabel(n int64) string {
	switch {
	case n <= 0:
		return ""
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
}

type hostedData struct {
	Servers     []hostedView
	Unavailable string // why the list could not be read (hosted servers off)
	LogsOf      string
	Logs        string
	LogsErr     string
	Form        map[string]string
}

var hostedDone = map[string]string{
	"hosted-register": "Hosted server registered; its container is starting.",
	"hosted-restart":  "Hosted server restarted.",
	"hosted-delete":   "Hosted server deleted.",
}

func (c *Console) hostedPage(w http.ResponseWriter, r *http.Request) {
	r, cancel := withTimeout(r, pageTimeout)
	defer cancel()
	v := c.newView(w, r, "Hosted", "hosted")
	v.Flash = hostedDone[r.URL.Query().Get("done")]
	c.renderHosted(w, r, v, http.StatusOK, nil)
}

// renderHosted reads the project's hosted servers (and, with ?logs=,
// one's log tail) through the API and renders the Hosted page.
func (c *Console) renderHosted(w http.ResponseWriter, r *http.Request, v *view, status int, form map[string]string) {
	if _, ok := c.project(w, r, v); !ok {
		return
	}
	p := r.PathValue("project")
	v.Title = "Hosted · " + p
	d := hostedData{Form: form}
	list, err := c.api(r).HostedServers(r.Context(), p)
	switch rp := c.fromAPI(err); {
	case rp.ok():
		for _, s := range list.Servers {
			d.Servers = append(d.Servers, hostedView{s})
		}
		c.addUsage(r, p, d.Servers)
	case rp.status == http.StatusServiceUnavailable:
		d.Unavailable = rp.message()
	default:
		c.failed(w, r, v, rp)
		return
	}
	if name := r.URL.Query().Get("logs"); name != "" {
		d.LogsOf = name
		if logs, err := c.api(r).HostedLogs(r.Context(), p, name, 200); err == nil {
			d.Logs = logs.Logs
		} else {
			d.LogsErr = c.fromAPI(err).message()
		}
	}
	v.Data = d
	c.render(w, status, "hosted", v)
}

// hostedDo registers, restarts or deletes a hosted server through the
// API (see formAction).
func (c *Console) hostedDo(w http.ResponseWriter, r *http.Request, p, action string) (reply, bool) {
	f := r.PostFormValue
	api, ctx := c.api(r), r.Context()
	var err error
	switch action {
	case "hosted-register":
		body := strings.TrimSpace(f("registration"))
		if body == "" {
			b, _ := json.Marshal(map[string]string{"name": strings.TrimSpace(f("name")), "image": strings.TrimSpace(f("image"))})
			body = string(b)
		}
		if !json.Valid([]byte(body)) {
			c.hostedFailed(w, r, reply{status: http.StatusBadRequest}, "The registration is not valid JSON: write it as for POST /api/v1/mcp/servers, such as {\"name\": \"notes\", \"image\": \"example/notes-mcp:1.2\"}.")
			return reply{}, true
		}
		_, err = api.RegisterHosted(ctx, p, json.RawMessage(body))
	case "hosted-restart":
		_, err = api.RestartHosted(ctx, p, f("name"))
	case "hosted-delete":
		err = api.DeleteHosted(ctx, p, f("name"), f("keep_volumes") == "on")
	default:
		c.renderError(w, r, nil, http.StatusNotFound, "No such action.")
		return reply{}, true
	}
	return c.fromAPI(err), false
}

func (c *Console) hostedFailed(w http.ResponseWriter, r *http.Request, rp reply, msg string) {
	if rp.status == http.StatusUnauthorized {
		c.failed(w, r, nil, rp)
		return
	}
	form := map[string]string{}
	for _, k := range []string{"name", "image", "registration"} {
		form[k] = r.PostFormValue(k)
	}
	v := c.newView(w, r, "Hosted", "hosted")
	v.Error = msg
	c.renderHosted(w, r, v, rp.status, form)
}

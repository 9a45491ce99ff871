package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// view is what every page's template gets: the layout's fields plus the
// page's own Data.
type view struct {
	Title   string
	Nav     string // the highlighted navigation entry
	Project string // the project the page is about, if any
	// Home is the overview this browser lands on: all projects, or the
	// one its project token reaches.
	Home     string
	Who      string
	LoggedIn bool
	CSRF     string
	// Refresh, when positive, reloads the page every so many seconds
	// (a meta refresh without JavaScript, a fetch that keeps open
	// details with it).
	Refresh int
	Flash   string
	Error   string
	Version string
	Data    any
}

// newView fills the layout's fields for r.
func (c *Console) newView(w http.ResponseWriter, r *http.Request, title, nav string) *view {
	v := &view{Title: title, Nav: nav, Project: r.PathValue("project"), CSRF: csrfToken(w, r), Version: c.opts.Version, Home: "/ui/"}
	if !projectID(v.Project) {
		v.Project = ""
	}
	switch tok, p := tokenOf(r), projectOf(r); {
	case tok != "" && p != "":
		v.Who, v.LoggedIn, v.Home = "project token · "+p, true, "/ui/p/"+p+"/"
	case tok != "":
		v.Who, v.LoggedIn = "admin token", true
	default:
		v.Who = "no token"
	}
	return v
}

var funcs = template.FuncMap{
	"pretty": func(raw json.RawMessage) string {
		var b bytes.Buffer
		if len(raw) == 0 {
			return ""
		}
		if json.Indent(&b, raw, "", "  ") != nil {
			return string(raw)
		}
		return b.String()
	},
	// when is t relative to now ("3 min ago", "in 2 h"), with the exact
	// time (UTC) in a tooltip: for lists where how long ago matters more
	// than the date.
	"when": func(t time.Time) template.HTML {
		if t.IsZero() {
			return ""
		}
		return template.HTML(`<time datetime="` + t.UTC().Format(time.RFC3339) + `" title="` + t.UTC().Format("2006-01-02 15:04:05") + ` UTC">` + relative(time.Since(t)) + `</time>`)
	},
	"short": func(id string) string {
		if len(id) > 8 {
			return id[:8]
		}
		return id
	},
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
	},
	"ms": func(f float64) string {
		switch {
		case f >= 1000:
			return fmt.Sprintf("%.2f s", f/1000)
		case f >= 10:
			return fmt.Sprintf("%.0f ms", f)
		default:
			return fmt.Sprintf("%.1f ms", f)
		}
	},
	"pct":  func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
	"path": url.PathEscape,
	"query": func(kv ...string) string {
		q := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				q.Set(kv[i], kv[i+1])
			}
		}
		return q.Encode()
	},
	"stateClass": func(s string) string {
		switch s {
		case "ready":
			return "good"
		case "idle", "connecting":
			return "neutral"
		case "disabled":
			return "muted"
		}
		return "bad"
	},
	"join":  strings.Join,
	"bytes": bytesLabel,
	"cores": coresLabel,
	"add":   func(a, b int) int { return a + b },
}

var pages = []string{"overview", "tools", "calls", "manage", "hosted", "sandbox", "login", "error"}

func parseTemplates() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, p := range pages {
		out[p] = template.Must(template.New(p).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p+".html"))
	}
	return out
}

// render writes page with status.
func (c *Console) render(w http.ResponseWriter, status int, page string, v *view) {
	var b bytes.Buffer
	if err := c.tmpl[page].ExecuteTemplate(&b, "layout", v); err != nil {
		c.log.Error("console: rendering a page", "page", page, "err", err)
		http.Error(w, "the page could not be rendered; the gateway log has the details", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// renderError writes the error page: the status and what to do.
func (c *Console) renderError(w http.ResponseWriter, r *http.Request, v *view, status int, msg string) {
	if v == nil {
		v = c.newView(w, r, http.StatusText(status), "")
	}
	v.Title = fmt.Sprintf("%d %s", status, http.StatusText(status))
	v.Refresh = 0
	if status == http.StatusForbidden || status == http.StatusNotFound {
		v.Project = "" // no links into a project this browser cannot see
	}
	v.Data = struct {
		Status int
		Text   string
		Msg    string
	}{status, http.StatusText(status), msg}
	c.render(w, status, "error", v)
}

// relative says how long ago d was (negative: how long until).
func relative(d time.Duration) string {
	future := d < 0
	if future {
		d = -d
	}
	var n int64
	var unit string
	switch {
	case d < time.Minute:
		n, unit = int64(d/time.Second), "s"
	case d < time.Hour:
		n, unit = int64(d/time.Minute), "min"
	case d < 48*time.Hour:
		n, unit = int64(d/time.Hour), "h"
	default:
		n, unit = int64(d/(24*time.Hour)), "days"
	}
	if future {
		return fmt.Sprintf("in %d %s", n, unit)
	}
	return fmt.Sprintf("%d %s ago", n, unit)
}

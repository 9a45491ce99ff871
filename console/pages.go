package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

// refreshSeconds is how often the overview reloads itself.
const refreshSeconds = 10

// pageTimeout bounds the gateway work behind one page (a status read
// connects servers never tried yet; a tool call waits for the tool).
const pageTimeout = 60 * time.Second

// ---- login

type loginData struct {
	Next, Project string
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	v := c.newView(w, r, "Log in", "login")
	v.Data = loginData{Next: safeNext(r.URL.Query().Get("next")), Project: r.URL.Query().Get("project")}
	c.render(w, http.StatusOK, "login", v)
}

// login checks the token against the API (the projects list answers 200
// to the admin, 403 to a project token and 401 to anything else; a
// project token is then checked against the project it names) and keeps
// it in the cookie.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimSpace(r.PostFormValue("token"))
	project := strings.TrimSpace(r.PostFormValue("project"))
	next := safeNext(r.PostFormValue("next"))
	fail := func(status int, msg string) {
		v := c.newView(w, r, "Log in", "login")
		v.Error = msg
		v.Data = loginData{Next: next, Project: project}
		c.render(w, status, "login", v)
	}
	if tok == "" {
		fail(http.StatusBadRequest, "Enter a token: the admin token (MCP_SERVER_ADMIN_TOKEN) or a project token (sbt_...).")
		return
	}
	// Ask as the token being tried, not as the cookie's.
	as := r.Clone(r.Context())
	as.Header.Del("Cookie")
	as.AddCookie(&http.Cookie{Name: tokenCookie, Value: tok})
	_, err := c.api(as).Projects(as.Context())
	rp := c.fromAPI(err)
	switch {
	case rp.ok():
		project = ""
	case rp.status == http.StatusForbidden:
		if !projectID(project) {
			fail(http.StatusBadRequest, "This is a project token: enter the project it belongs to.")
			return
		}
		_, err := c.api(as).Project(as.Context(), project)
		prp := c.fromAPI(err)
		if !prp.ok() {
			if prp.status == http.StatusForbidden {
				fail(http.StatusForbidden, "This token does not belong to project "+project+".")
				return
			}
			fail(prp.status, prp.message())
			return
		}
		if next == "/ui/" {
			next = "/ui/p/" + project + "/"
		}
	case rp.status == http.StatusUnauthorized:
		fail(http.StatusUnauthorized, "Unknown or revoked token.")
		return
	default:
		fail(rp.status, rp.message())
		return
	}
	http.SetCookie(w, cookie(r, tokenCookie, tok, 0))
	if project != "" {
		http.SetCookie(w, cookie(r, projectCookie, project, 0))
	} else {
		http.SetCookie(w, cookie(r, projectCookie, "", -1))
	}
	// A fresh CSRF token for the new session.
	http.SetCookie(w, cookie(r, csrfCookie, randomToken(), 0))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	for _, n := range []string{tokenCookie, projectCookie, csrfCookie} {
		http.SetCookie(w, cookie(r, n, "", -1))
	}
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// ---- overview

// serverView is a server as the pages show it.
type serverView struct{ apiclient.Server }

// State is what the overview shows: the live state, or "disabled".
func (s serverView) State() string {
	switch {
	case !s.Enabled:
		return "disabled"
	case s.Status == nil:
		return "idle"
	}
	return string(s.Status.State)
}

// serverViews wraps a server list for the pages.
func serverViews(list []apiclient.Server) []serverView {
	out := make([]serverView, len(list))
	for i, s := range list {
		out[i] = serverView{s}
	}
	return out
}

type projectOverview struct {
	apiclient.Project
	Servers  []serverView
	Version  string
	Uptime   string
	Sessions int
	Tools    int
	Problems int
}

// mcpPath is project p's MCP endpoint on the gateway.
func mcpPath(p string) string {
	if p == "default" {
		return "/mcp"
	}
	return "/projects/" + url.PathEscape(p) + "/mcp"
}

// loadOverview reads one project's servers (with live status) and its
// edge's status (version, uptime, sessions).
func (c *Console) loadOverview(r *http.Request, p apiclient.Project) (projectOverview, reply) {
	o := projectOverview{Project: p}
	servers, err := c.api(r).Servers(r.Context(), p.ID)
	if err != nil {
		return o, c.fromAPI(err)
	}
	o.Servers = serverViews(servers.Servers)
	for _, s := range o.Servers {
		if st := s.State(); st != "ready" && st != "idle" && st != "connecting" && st != "disabled" {
			o.Problems++
		}
		if s.Status != nil && s.Enabled {
			o.Tools += switchboard.ListedTools(*s.Status) // as tools/list counts
		}
	}
	var st struct {
		Version  string `json:"version"`
		Uptime   string `json:"uptime"`
		Sessions int    `json:"sessions"`
	}
	if rp := c.call(r, http.MethodGet, mcpPath(p.ID), nil, nil); rp.ok() && json.Unmarshal(rp.body, &st) == nil {
		o.Version, o.Uptime, o.Sessions = st.Version, st.Uptime, st.Sessions
	}
	return o, reply{status: http.StatusOK}
}

type overviewData struct {
	Projects []projectOverview
	Single   bool
}

// overviewAll shows every project the browser's token reaches: all of
// them for the admin (and in dev mode the open ones); a project token is
// sent to its own project's overview.
func (c *Console) overviewAll(w http.ResponseWriter, r *http.Request) {
	r, cancel := withTimeout(r, pageTimeout)
	defer cancel()
	v := c.newView(w, r, "Overview", "overview")
	list, err := c.api(r).Projects(r.Context())
	rp := c.fromAPI(err)
	if rp.status == http.StatusForbidden && projectOf(r) != "" {
		http.Redirect(w, r, "/ui/p/"+projectOf(r)+"/", http.StatusSeeOther)
		return
	}
	if !rp.ok() {
		c.failed(w, r, v, rp)
		return
	}
	data := overviewData{}
	for _, p := range list.Projects {
		if p.Closed {
			// Shown, marked as needing its token, not left out.
			data.Projects = append(data.Projects, projectOverview{Project: p})
			continue
		}
		o, rp := c.loadOverview(r, p)
		if !rp.ok() {
			if rp.status == http.StatusUnauthorized {
				p.Closed = true // closed by its tokens since the list was read
				data.Projects = append(data.Projects, projectOverview{Project: p})
				continue
			}
			c.failed(w, r, v, rp)
			return
		}
		data.Projects = append(data.Projects, o)
	}
	v.Data, v.Refresh = data, refreshSeconds
	if r.URL.Query().Get("refresh") == "off" {
		v.Refresh = 0
	}
	c.render(w, http.StatusOK, "overview", v)
}

func (c *Console) overviewProject(w http.ResponseWriter, r *http.Request) {
	r, cancel := withTimeout(r, pageTimeout)
	defer cancel()
	v := c.newView(w, r, "Overview", "servers")
	p, ok := c.project(w, r, v)
	if !ok {
		return
	}
	v.Title = "Overview · " + p.ID
	o, rp := c.loadOverview(r, p)
	if !rp.ok() {
		c.failed(w, r, v, rp)
		return
	}
	v.Data, v.Refresh = overviewData{Projects: []projectOverview{o}, Single: true}, refreshSeconds
	if r.URL.Query().Get("refresh") == "off" {
		v.Refresh = 0
	}
	c.render(w, http.StatusOK, "overview", v)
}

// project reads the page's project through the API, which decides
// whether this browser may see it (401 to the login form, 403 and 404 to
// an error page).
func (c *Console) project(w http.ResponseWriter, r *http.Request, v *view) (apiclient.Project, bool) {
	id := r.PathValue("project")
	if !projectID(id) {
		c.renderError(w, r, v, http.StatusNotFound, "Project not found (project IDs are lowercase letters, digits, '_' and '-').")
		return apiclient.Project{}, false
	}
	p, err := c.api(r).Project(r.Context(), id)
	if err != nil {
		c.failed(w, r, v, c.fromAPI(err))
		return p, false
	}
	return p, true
}

// createProject creates a project through the API (the admin's, or
// anyone's in dev mode) and opens its Manage page; a refusal shows the
// overview's error page with the API's status and reason.
func (c *Console) createProject(w http.ResponseWriter, r *http.Request) {
	r, cancel := withTimeout(r, pageTimeout)
	defer cancel()
	id := strings.TrimSpace(r.PostFormValue("id"))
	if _, err := c.api(r).CreateProject(r.Context(), apiclient.NewProject{ID: id, Description: r.PostFormValue("description")}); err != nil {
		c.failed(w, r, nil, c.fromAPI(err))
		return
	}
	http.Redirect(w, r, "/ui/p/"+url.PathEscape(id)+"/manage", http.StatusSeeOther)
}

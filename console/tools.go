package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// toolView is one tool as the Tools page shows it.
type toolView struct {
	Name        string
	Server      string
	Title       string
	Description string
	Props       []propView // the input schema's top-level properties
	Raw         json.RawMessage
	Schema      json.RawMessage
	Annotations []string
	// Result of a "try it" call of this tool, when the page answers one.
	Result *tryResult
	Form   map[string]string // what was sent, to fill the form again
}

// propView is one property of an input schema, with what its form field
// needs.
type propView struct {
	Name        string
	Type        string // as the schema says ("string", "integer", "string | null", ...)
	Kind        string // form field: text, number, integer, bool, enum, json
	Required    bool
	Description string
	Enum        []string
	Default     string
	Nested      []propView // properties of an object
}

type tryResult struct {
	OK      bool   // an answer that is not an error
	IsError bool   // a tool error (isError: true)
	Error   string // a JSON-RPC or transport error
	Code    int
	Text    []textItem // text content items
	JSON    string     // the whole result, indented
	// Denied is the endpoint's refusal of the session (401, 403), which
	// is shown as a page's would be.
	Denied reply
}

type toolsData struct {
	Tools   []toolView
	Servers []string
	Open    string // the tool whose try-it form is open
	// Features are the project's prompts and resources (read-only).
	Features featuresView
}

func (c *Console) loadTools(w http.ResponseWriter, r *http.Request, v *view) ([]toolView, bool) {
	if _, ok := c.project(w, r, v); !ok {
		return nil, false
	}
	list, err := c.api(r).Tools(r.Context(), r.PathValue("project"))
	if err != nil {
		c.failed(w, r, v, c.fromAPI(err))
		return nil, false
	}
	out := make([]toolView, 0, len(list.Tools))
	for _, t := range list.Tools {
		out = append(out, toToolView(t.Name, t.Server, t.Tool))
	}
	return out, true
}

func toToolView(name, server string, raw json.RawMessage) toolView {
	tv := toolView{Name: name, Server: server, Raw: raw}
	var t struct {
		Title       string          `json:"title"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Annotations map[string]any  `json:"annotations"`
	}
	_ = json.Unmarshal(raw, &t)
	tv.Title, tv.Description, tv.Schema = t.Title, t.Description, t.InputSchema
	for _, k := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} {
		if b, ok := t.Annotations[k].(bool); ok && b {
			tv.Annotations = append(tv.Annotations, strings.TrimSuffix(k, "Hint"))
		}
	}
	tv.Props = schemaProps(t.InputSchema, 0)
	return tv
}

// schemaProps lists an object schema's properties, required first in
// declared order kept by the decoder, nesting objects a few levels deep.
func schemaProps(raw json.RawMessage, depth int) []propView {
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if json.Unmarshal(raw, &s) != nil || len(s.Properties) == 0 {
		return nil
	}
	names, schemas := orderedMembers(s.Properties)
	var out []propView
	for i, name := range names {
		var p struct {
			Type        json.RawMessage   `json:"type"`
			Description string            `json:"description"`
			Enum        []json.RawMessage `json:"enum"`
			Default     json.RawMessage   `json:"default"`
		}
		_ = json.Unmarshal(schemas[i], &p)
		pv := propView{Name: name, Required: slices.Contains(s.Required, name), Description: p.Description}
		types := schemaTypes(p.Type)
		pv.Type = strings.Join(types, " | ")
		if pv.Type == "" {
			pv.Type = "any"
		}
		for _, e := range p.Enum {
			var s string
			if json.Unmarshal(e, &s) == nil {
				pv.Enum = append(pv.Enum, s)
			}
		}
		if len(p.Default) > 0 {
			pv.Default = string(p.Default)
		}
		main := ""
		for _, t := range types {
			if t != "null" {
				main = t
				break
			}
		}
		switch {
		case len(pv.Enum) > 0 && len(pv.Enum) == len(p.Enum) && main == "string":
			pv.Kind = "enum"
		case main == "string":
			pv.Kind = "text"
		case main == "integer":
			pv.Kind = "integer"
		case main == "number":
			pv.Kind = "number"
		case main == "boolean":
			pv.Kind = "bool"
		default:
			pv.Kind = "json"
		}
		if main == "object" && depth < 3 {
			pv.Nested = schemaProps(schemas[i], depth+1)
		}
		out = append(out, pv)
	}
	return out
}

func schemaTypes(raw json.RawMessage) []string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(raw, &many)
	return many
}

// orderedMembers decodes a JSON object's members in their order.
func orderedMembers(raw json.RawMessage) ([]string, []json.RawMessage) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil
	}
	var names []string
	var vals []json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			break
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			break
		}
		names, vals = append(names, name), append(vals, v)
	}
	return names, vals
}

func (c *Console) toolsPage(w http.ResponseWriter, r *http.Request) {
	r, cancel := withTimeout(r, pageTimeout)
	defer cancel()
	v := c.newView(w, r, "Tools", "tools")
	tools, ok := c.loadTools(w, r, v)
	if !ok {
		return
	}
	v.Title = "Tools · " + r.PathValue("project")
	d := newToolsData(tools, r.URL.Query().Get("tool"))
	d.Features = c.loadFeatures(r, r.PathValue("project"))
	v.Data = d
	c.render(w, http.StatusOK, "tools", v)
}

func newToolsData(tools []toolView, open string) toolsData {
	d := toolsData{Tools: tools, Open: open}
	for _, t := range tools {
		if !slices.Contains(d.Servers, t.Server) {
			d.Servers = append(d.Servers, t.Server)
		}
	}
	return d
}

// tryTool calls one tool through the project's MCP endpoint and shows
// the answer under its form.
func (c *Console) tryTool(w http.ResponseWriter, r *http.Request) {
	r, cancel := withTimeout(r, pageTimeout)
	defer cancel()
	v := c.newView(w, r, "Tools", "tools")
	tools, ok := c.loadTools(w, r, v)
	if !ok {
		return
	}
	name := r.PostFormValue("tool")
	i := slices.IndexFunc(tools, func(t toolView) bool { return t.Name == name })
	if i < 0 {
		c.renderError(w, r, v, http.StatusNotFound, "The project serves no tool of that name (any more); reload the Tools page.")
		return
	}
	t := &tools[i]
	t.Form = map[string]string{}
	for k, vals := range r.PostForm {
		if strings.HasPrefix(k, "arg.") || k == "json" {
			t.Form[k] = vals[0]
		}
	}
	args, err := formArguments(t.Props, r)
	status := http.StatusOK
	if err != nil {
		t.Result = &tryResult{Error: err.Error()}
		status = http.StatusBadRequest
	} else {
		t.Result = c.callTool(r, r.PathValue("project"), name, args)
		if t.Result.Denied.status != 0 {
			c.failed(w, r, v, t.Result.Denied)
			return
		}
	}
	v.Title = "Tools · " + r.PathValue("project")
	d := newToolsData(tools, name)
	d.Features = c.loadFeatures(r, r.PathValue("project"))
	v.Data = d
	c.render(w, status, "tools", v)
}

// formError is a form value that does not fit its field.
type formError string

func (e formError) Error() string { return string(e) }

// formArguments builds a call's arguments: the JSON box when filled, else
// the fields, each converted to its schema type; empty optional fields
// are left out.
func formArguments(props []propView, r *http.Request) (json.RawMessage, error) {
	if raw := strings.TrimSpace(r.PostFormValue("json")); raw != "" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &obj); err != nil || obj == nil {
			return nil, formError("Arguments (JSON) must be a JSON object such as {\"text\": \"hi\"}.")
		}
		return json.RawMessage(raw), nil
	}
	args := map[string]json.RawMessage{}
	for _, p := range props {
		val := r.PostFormValue("arg." + p.Name)
		if p.Kind == "bool" {
			switch val {
			case "true", "false":
				args[p.Name] = json.RawMessage(val)
			}
			continue
		}
		if strings.TrimSpace(val) == "" {
			continue
		}
		switch p.Kind {
		case "integer":
			if _, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64); err != nil {
				return nil, formError(p.Name + " must be an integer.")
			}
			args[p.Name] = json.RawMessage(strings.TrimSpace(val))
		case "number":
			if _, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err != nil {
				return nil, formError(p.Name + " must be a number.")
			}
			args[p.Name] = json.RawMessage(strings.TrimSpace(val))
		case "json":
			if !json.Valid([]byte(val)) {
				return nil, formError(p.Name + " must be JSON (an object, array, number, string in quotes, true, false or null).")
			}
			args[p.Name] = json.RawMessage(val)
		default:
			b, _ := json.Marshal(val)
			args[p.Name] = b
		}
	}
	b, _ := json.Marshal(args)
	return b, nil
}

// textItem is one text content item of a result as the page shows it.
type textItem struct {
	Body string
	JSON bool // the whole text is a JSON object or array, shown indented
}

// newTextItem keeps a text as it came, line breaks and all, unless the
// whole text is a JSON object or array (many tools answer so, on one
// line): that is indented to be read.
func newTextItem(text string) textItem {
	t := strings.TrimSpace(text)
	if t == "" || (t[0] != '{' && t[0] != '[') || !json.Valid([]byte(t)) {
		return textItem{Body: text}
	}
	var b bytes.Buffer
	if json.Indent(&b, []byte(t), "", "  ") != nil {
		return textItem{Body: text}
	}
	return textItem{Body: b.String(), JSON: true}
}

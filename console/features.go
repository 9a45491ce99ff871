package console

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/mcpclient"
)

// featuresView is the project's prompts, resources and resource
// templates, as its MCP endpoint lists them, for the read-only part of
// the Tools page.
type featuresView struct {
	Prompts   []featureItem
	Resources []featureItem
	Templates []featureItem
	// Error says why they could not be listed ("" when they were).
	Error string
}

// featureItem is one prompt (Name, Title, Description, Arguments), one
// resource (URI, Name, MIMEType...) or one template (URI holds its
// uriTemplate).
type featureItem struct {
	Name        string
	Title       string
	Description string
	URI         string
	MIMEType    string
	Arguments   []string // a prompt's arguments, "name" or "name*" when required
	Raw         json.RawMessage
}

// maxFeaturePages bounds how many pages of each list the page reads.
const maxFeaturePages = 20

// loadFeatures lists the project's prompts, resources and templates
// through its MCP endpoint, in process and with the browser's token, as
// try-it calls tools.
func (c *Console) loadFeatures(r *http.Request, project string) featuresView {
	s := c.mcpSession(r, project)
	err := s.Initialize(r.Context())
	if s.ID != "" {
		defer s.Close(r.Context())
	}
	if err != nil {
		return featuresView{Error: "the MCP endpoint did not open a session: " + err.Error()}
	}
	var v featuresView
	for _, l := range []struct {
		method, key string
		into        *[]featureItem
	}{
		{"prompts/list", "prompts", &v.Prompts},
		{"resources/list", "resources", &v.Resources},
		{"resources/templates/list", "resourceTemplates", &v.Templates},
	} {
		cursor := ""
		for range maxFeaturePages {
			params := map[string]any{}
			if cursor != "" {
				params["cursor"] = cursor
			}
			res, err := s.Request(r.Context(), l.method, params)
			if err != nil {
				var re *mcpclient.RPCError
				if errors.As(err, &re) {
					v.Error = l.method + ": " + re.Message
				} else {
					v.Error = l.method + ": " + err.Error()
				}
				return v
			}
			var page map[string]json.RawMessage
			var items []json.RawMessage
			_ = json.Unmarshal(res, &page)
			_ = json.Unmarshal(page[l.key], &items)
			for _, raw := range items {
				*l.into = append(*l.into, toFeatureItem(raw))
			}
			cursor = ""
			_ = json.Unmarshal(page["nextCursor"], &cursor)
			if cursor == "" {
				break
			}
		}
	}
	return v
}

func toFeatureItem(raw json.RawMessage) featureItem {
	var o struct {
		Name        string `json:"name"`
		Title       string `json:"title"`
		Description string `json:"description"`
		URI         string `json:"uri"`
		URITemplate string `json:"uriTemplate"`
		MIMEType    string `json:"mimeType"`
		Arguments   []struct {
			Name     string `json:"name"`
			Required bool   `json:"required"`
		} `json:"arguments"`
	}
	_ = json.Unmarshal(raw, &o)
	it := featureItem{Name: o.Name, Title: o.Title, Description: o.Description, URI: o.URI, MIMEType: o.MIMEType, Raw: raw}
	if it.URI == "" {
		it.URI = o.URITemplate
	}
	for _, a := range o.Arguments {
		n := a.Name
		if a.Required {
			n += "*"
		}
		it.Arguments = append(it.Arguments, n)
	}
	return it
}

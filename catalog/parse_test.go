package catalog_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/catalog"
)

func TestParseCatalog(t *testing.T) {
	good := `
name: docker-mcp
displayName: Docker MCP Catalog
registry:
  fetch:
    description: Fetches a URL
    title: Fetch
    type: server
    image: mcp/fetch:1.0
    icon: https://example.com/icon.png
    tools: [{name: fetch}]
    metadata: {category: web}
  memory:
    type: server
    image: mcp/memory:1.0
    longLived: true
    disableNetwork: true
    command: ["--store", "/data"]
    env: [{name: LOG_LEVEL, value: info}, {name: TOKEN, value: "${API_TOKEN}"}]
    secrets: [{name: memory.api_key, env: MEMORY_KEY}]
    user: "1000:0"
    volumes: ["memory-data:/data", "cache:/cache:ro", "dev:/srv/dev"]
    pullPolicy: always
    registryAuth: {username: "${REG_USER}", password: "${REG_PASS}"}
  hosted-elsewhere:
    type: remote
    remote: {url: "https://example.com/mcp"}
`
	c, err := catalog.ParseCatalog(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range c.Entries {
		names = append(names, e.Name)
	}
	if !slices.Equal(names, []string{"fetch", "memory"}) {
		t.Fatalf("entries %v, want fetch and memory (the remote one skipped)", names)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "hosted-elsewhere") {
		t.Fatalf("warnings %q, want one naming the skipped remote server", c.Warnings)
	}
	m := c.Entry("memory")
	if !m.LongLived || m.Network != "none" || c.Entry("fetch").Network != "bridge" {
		t.Fatalf("memory %+v / fetch network %q: want long-lived without network, fetch on bridge", m, c.Entry("fetch").Network)
	}
	if m.Secrets["MEMORY_KEY"] != "memory_api_key" || m.Env["TOKEN"] != "${API_TOKEN}" {
		t.Fatalf("secrets %v env %v", m.Secrets, m.Env)
	}
	if m.PullPolicy != "always" || m.RegistryAuth == nil || *m.RegistryAuth != (switchboard.RegistryAuth{Username: "${REG_USER}", Password: "${REG_PASS}"}) {
		t.Fatalf("memory pullPolicy %q registryAuth %+v, want always and the two references", m.PullPolicy, m.RegistryAuth)
	}
	if f := c.Entry("fetch"); f.PullPolicy != "" || f.RegistryAuth != nil {
		t.Fatalf("fetch pullPolicy %q registryAuth %+v, want neither (the gateway's policy, no credentials)", f.PullPolicy, f.RegistryAuth)
	}
	wantVols := []catalog.CatalogVolume{{Name: "memory-data", Target: "/data"}, {Name: "cache", Target: "/cache", ReadOnly: true}, {Name: "dev", Target: "/srv/dev"}}
	if !slices.Equal(m.Volumes, wantVols) {
		t.Fatalf("volumes %+v, want %+v", m.Volumes, wantVols)
	}

	bad := map[string]struct{ file, want string }{
		"empty":          {"", "empty"},
		"no registry":    {"name: x\n", "no servers"},
		"unknown field":  {"registry:\n  a: {image: x:1, longlived: true}\n", "longlived"},
		"no image":       {"registry:\n  a: {type: server}\n", "image is required"},
		"bad type":       {"registry:\n  a: {type: vm, image: x:1}\n", `type "vm"`},
		"host path":      {"registry:\n  a: {image: x:1, volumes: [\"/etc:/etc\"]}\n", "host paths"},
		"two documents":  {"registry:\n  a: {image: x:1}\n---\nregistry:\n  b: {image: y:1}\n", "more than one YAML document"},
		"dup env":        {"registry:\n  a: {image: x:1, env: [{name: A, value: b}, {name: A, value: c}]}\n", "listed twice"},
		"two secrets":    {"registry:\n  a: {image: x:1, secrets: [{name: s, env: K}, {name: t, env: K}]}\n", "two secrets"},
		"bad env name":   {"registry:\n  a: {image: x:1, env: [{name: 1A, value: b}]}\n", "env name"},
		"root target":    {"registry:\n  a: {image: x:1, volumes: [\"v:/\"]}\n", `must not be "/"`},
		"proc target":    {"registry:\n  a: {image: x:1, volumes: [\"v:/proc\"]}\n", `volume "v:/proc": the container path must not be /proc`},
		"sys subdir":     {"registry:\n  a: {image: x:1, volumes: [\"v:/sys/kernel:ro\"]}\n", "must not be /sys"},
		"dev target":     {"registry:\n  a: {image: x:1, volumes: [\"v:/dev/shm\"]}\n", "must not be /dev"},
		"rel target":     {"registry:\n  a: {image: x:1, volumes: [\"v:data\"]}\n", "absolute"},
		"unclean target": {"registry:\n  a: {image: x:1, volumes: [\"v:/data/../proc\"]}\n", "clean"},
		"user 0:0":       {"registry:\n  a: {image: x:1, user: \"0:0\"}\n", `"a": user "0:0" is root`},
		"user 0":         {"registry:\n  a: {image: x:1, user: \"0\"}\n", "is root"},
		"user root":      {"registry:\n  a: {image: x:1, user: root}\n", "is root"},
		"user root:grp":  {"registry:\n  a: {image: x:1, user: \"root:staff\"}\n", "is root"},
		"user 0:1000":    {"registry:\n  a: {image: x:1, user: \"0:1000\"}\n", "is root"},
		"user 000":       {"registry:\n  a: {image: x:1, user: \"000\"}\n", "is root"},
		"bad name":       {"registry:\n  \"a b\": {image: x:1}\n", "name must be"},
		"not yaml":       {"registry: [\n", "catalog file"},
		"two problems":   {"registry:\n  a: {type: server}\n  b: {image: \"bad image!\"}\n", `"b": image`},
		"bad pullPolicy": {"registry:\n  a: {image: x:1, pullPolicy: sometimes}\n", `"a": pullPolicy "sometimes": want if-not-present, always or never`},
		"literal auth":   {"registry:\n  a: {image: x:1, registryAuth: {username: bob, password: hunter2}}\n", "${NAME} reference"},
		"half literal":   {"registry:\n  a: {image: x:1, registryAuth: {username: \"${U}\", password: hunter2}}\n", "${NAME} reference"},
		"ref in text":    {"registry:\n  a: {image: x:1, registryAuth: {username: \"${U}\", password: \"pw-${P}\"}}\n", "${NAME} reference"},
		"auth field":     {"registry:\n  a: {image: x:1, registryAuth: {user: \"${U}\"}}\n", "user"},
		"dup env/secret": {"registry:\n  a: {image: x:1, env: [{name: K, value: v}], secrets: [{name: s, env: K}]}\n", "both"},
	}
	// Docker's own catalogs carry fields Switchboard ignores, and entries
	// with {{...}} templates, which are skipped (with a warning) rather
	// than failing the file.
	docker := `
version: 2
registry:
  playwright:
    description: Browser automation
    title: Playwright
    type: server
    dateAdded: "2025-04-16T00:00:00Z"
    image: mcp/playwright@sha256:0123
    ref: ""
    toolsUrl: https://example.com/tools.json
    source: https://github.com/microsoft/playwright-mcp
    upstream: https://github.com/microsoft/playwright-mcp
    secrets: [{name: playwright.token, env: PW_TOKEN, example: abc}]
    env: [{name: LOG, value: debug, example: info}]
    prompts: 0
    resources: {}
  templated:
    image: mcp/files:1
    volumes: ["{{templated.paths|volume|into}}:/data"]
  templated-env:
    image: mcp/files:1
    env: [{name: ROOT, value: "{{templated-env.root}}"}]
`
	dc, err := catalog.ParseCatalog(strings.NewReader(docker))
	if err != nil {
		t.Fatalf("a catalog in Docker's own shape: %v", err)
	}
	if len(dc.Entries) != 1 || dc.Entries[0].Name != "playwright" || len(dc.Warnings) != 2 || !strings.Contains(dc.Warnings[0], "templates") {
		t.Fatalf("entries %+v warnings %q: want playwright, and the two templated entries skipped", dc.Entries, dc.Warnings)
	}

	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := catalog.ParseCatalog(strings.NewReader(tc.file))
			if !errors.Is(err, switchboard.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("err = %v: it shows the literal password", err)
			}
		})
	}
}

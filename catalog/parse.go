package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/hosted"
)

// A catalog file lists MCP servers a client session can switch on with
// mcp-add, in Docker MCP Gateway's `registry:` format, so a catalog
// written for Docker's gateway loads unchanged:
//
//	registry:
//	  fetch:
//	    description: Fetches a URL from the internet
//	    title: Fetch
//	    type: server
//	    image: mcp/fetch@sha256:...
//	    longLived: false
//	    command: ["--ignore-robots-txt"]
//	    env: [{name: LOG_LEVEL, value: info}]
//	    secrets: [{name: fetch.api_key, env: FETCH_API_KEY}]
//	    volumes: ["fetch-cache:/cache"]
//
// Fields of Docker's format that Switchboard does not act on (icon,
// readme, tools, metadata, oauth, policy...) are accepted and ignored;
// any other field is an error, so a typo is not silently dropped. Entries
// of type "remote" or "poci" are skipped with a warning.

// maxCatalogBytes bounds a catalog file.
const maxCatalogBytes = 8 << 20

// CatalogEntry is one server of the catalog, validated.
type CatalogEntry struct {
	Name        string
	Title       string
	Description string
	Image       string
	// LongLived: one container for the session's lifetime; otherwise a
	// fresh container per tool call.
	LongLived bool
	Command   []string
	User      string
	// Env are literal values or `${SECRET}` references to the calling
	// project's secrets; Secrets maps project secret names to variables.
	Env     map[string]string
	Secrets map[string]string // env variable -> project secret name
	Volumes []CatalogVolume
	// Network is "none" (disableNetwork: true) or "bridge".
	Network      string
	ReadOnlyRoot bool
	// Runtime is the entry's container runtime ("auto" or a runtime name
	// the engine lists); "" takes the gateway's setting.
	Runtime string
	// PullPolicy is the entry's pull policy; "" takes the gateway's.
	PullPolicy string
	// Tools are the tool names the catalog lists for the server (nil:
	// not listed; learned when a session first adds it).
	Tools []string
	// RegistryAuth are `${SECRET}` references to the calling project's
	// secrets, the image registry's credentials; nil: none.
	RegistryAuth *switchboard.RegistryAuth
}

// Refuse drops the entries whose image check fails (the gateway's image
// allow-list), each with a warning naming the rule.
func (c *Catalog) Refuse(check func(image string) error) {
	c.Entries = slices.DeleteFunc(c.Entries, func(e *CatalogEntry) bool {
		if err := check(e.Image); err != nil {
			c.Warnings = append(c.Warnings, fmt.Sprintf("catalog server %q refused: %s", e.Name, switchboard.Message(err)))
			return true
		}
		return false
	})
}

// CatalogVolume is a named volume of a catalog entry: it persists across
// sessions and is never removed by the gateway (it is the operator's).
type CatalogVolume struct {
	Name, Target string
	ReadOnly     bool
}

// Catalog is a parsed catalog file: its entries by name, and what was
// skipped.
type Catalog struct {
	Entries  []*CatalogEntry // sorted by name
	Warnings []string
}

// Entry returns the entry called name.
func (c *Catalog) Entry(name string) *CatalogEntry {
	if c == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(c.Entries, name, func(e *CatalogEntry, n string) int { return strings.Compare(e.Name, n) })
	if !ok {
		return nil
	}
	return c.Entries[i]
}

// catalogFile is the file's shape. Fields Docker's format defines but
// Switchboard ignores are listed so they are not errors.
type catalogFile struct {
	Version     any                     `yaml:"version"`
	Name        string                  `yaml:"name"`
	DisplayName string                  `yaml:"displayName"`
	Registry    map[string]catalogEntry `yaml:"registry"`
	Policy      any                     `yaml:"policy"`
}

type catalogEntry struct {
	Name           string   `yaml:"name"`
	Type           string   `yaml:"type"`
	Image          string   `yaml:"image"`
	Description    string   `yaml:"description"`
	Title          string   `yaml:"title"`
	LongLived      bool     `yaml:"longLived"`
	Command        []string `yaml:"command"`
	User           string   `yaml:"user"`
	DisableNetwork bool     `yaml:"disableNetwork"`
	ReadOnlyRoot   bool     `yaml:"readOnlyRoot"` // ours, not Docker's: default false, as there
	Runtime        string   `yaml:"runtime"`      // ours: "auto" or a runtime name; "" takes MCP_SERVER_CONTAINER_RUNTIME
	PullPolicy     string   `yaml:"pullPolicy"`   // ours: if-not-present, always or never; "" takes MCP_SERVER_PULL_POLICY
	RegistryAuth   *struct {
		Username string `yaml:"username"`
		Password string `yaml:"password"`
	} `yaml:"registryAuth"` // ours: ${SECRET} references
	Env []struct {
		Name        string `yaml:"name"`
		Value       string `yaml:"value"`
		Example     any    `yaml:"example"`
		Description any    `yaml:"description"`
	} `yaml:"env"`
	Secrets []struct {
		Name        string `yaml:"name"`
		Env         string `yaml:"env"`
		Example     any    `yaml:"example"`
		Description any    `yaml:"description"`
	} `yaml:"secrets"`
	Volumes []string `yaml:"volumes"`
	// Tools names the server's tools (Docker's catalogs list them), so a
	// call of one by name finds its server without starting any.
	Tools []struct {
		Name string `yaml:"name"`
	} `yaml:"tools"`
	// Accepted, not acted on.
	Icon        any `yaml:"icon"`
	Readme      any `yaml:"readme"`
	Remote      any `yaml:"remote"`
	SSEEndpoint any `yaml:"sseEndpoint"`
	OAuth       any `yaml:"oauth"`
	AllowHosts  any `yaml:"allowHosts"`
	ExtraHosts  any `yaml:"extraHosts"`
	Config      any `yaml:"config"`
	Prefix      any `yaml:"prefix"`
	Metadata    any `yaml:"metadata"`
	Policy      any `yaml:"policy"`
	DateAdded   any `yaml:"dateAdded"`
	Ref         any `yaml:"ref"`
	ToolsURL    any `yaml:"toolsUrl"`
	Source      any `yaml:"source"`
	Upstream    any `yaml:"upstream"`
	Prompts     any `yaml:"prompts"`
	Resources   any `yaml:"resources"`
}

var (
	catalogVolumeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
	secretNameChars   = regexp.MustCompile(`[^A-Za-z0-9_]`)
)

// ParseCatalog reads a catalog file. Every problem is reported at once,
// each naming the entry and field; errors wrap switchboard.ErrInvalid.
func ParseCatalog(r io.Reader) (*Catalog, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxCatalogBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxCatalogBytes {
		return nil, invalid("catalog file is larger than %d MiB", maxCatalogBytes>>20)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f catalogFile
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, invalid("catalog file is empty; it needs a top-level \"registry:\" map of servers")
		}
		return nil, invalid("catalog file: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more any
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, invalid("catalog file holds more than one YAML document (\"---\"); put every server under the first one's \"registry:\"")
	}
	if len(f.Registry) == 0 {
		return nil, invalid("catalog file has no servers: it needs a top-level \"registry:\" map of servers")
	}
	c := &Catalog{}
	var errs []error
	for name, raw := range f.Registry {
		e, warn, err := catalogEntryOf(name, raw)
		switch {
		case err != nil:
			errs = append(errs, err)
		case warn != "":
			c.Warnings = append(c.Warnings, warn)
		default:
			c.Entries = append(c.Entries, e)
		}
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(c.Entries, func(a, b *CatalogEntry) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(c.Warnings)
	return c, nil
}

func catalogEntryOf(name string, raw catalogEntry) (*CatalogEntry, string, error) {
	if !hosted.ValidName.MatchString(name) {
		return nil, "", invalid("catalog server %q: the name must be 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit", switchboard.Clip(name))
	}
	switch raw.Type {
	case "", "server":
	case "remote", "poci":
		return nil, fmt.Sprintf("catalog server %q skipped: type %q is not supported (only \"server\", a container image)", name, raw.Type), nil
	default:
		return nil, "", invalid("catalog server %q: type %q is not one of \"server\", \"remote\", \"poci\"", name, switchboard.Clip(raw.Type))
	}
	bad := func(format string, args ...any) (*CatalogEntry, string, error) {
		return nil, "", invalid("catalog server %q: "+format, append([]any{name}, args...)...)
	}
	if raw.Image == "" {
		return bad("image is required")
	}
	if !hosted.ImageRef.MatchString(raw.Image) {
		return bad("image %q is not a valid image reference", switchboard.Clip(raw.Image))
	}
	e := &CatalogEntry{Name: name, Title: raw.Title, Description: raw.Description, Image: raw.Image,
		LongLived: raw.LongLived, Command: raw.Command, User: raw.User, Network: "bridge", ReadOnlyRoot: raw.ReadOnlyRoot,
		Env: map[string]string{}, Secrets: map[string]string{}}
	if raw.DisableNetwork {
		e.Network = "none"
	}
	if raw.Runtime != "" {
		if !hosted.RuntimeName.MatchString(raw.Runtime) {
			return bad("runtime %q must be \"auto\" or a container runtime's name (\"runc\", \"runsc\")", switchboard.Clip(raw.Runtime))
		}
		e.Runtime = raw.Runtime
	}
	if raw.PullPolicy != "" {
		if _, err := engine.ParsePullPolicy(raw.PullPolicy); err != nil {
			return bad("pullPolicy %q: want if-not-present, always or never", switchboard.Clip(raw.PullPolicy))
		}
		e.PullPolicy = raw.PullPolicy
	}
	if a := raw.RegistryAuth; a != nil {
		if !hosted.WholeRef.MatchString(a.Username) || !hosted.WholeRef.MatchString(a.Password) {
			return bad("registryAuth takes the username and password from the calling project's secrets: write each as a ${NAME} reference")
		}
		e.RegistryAuth = &switchboard.RegistryAuth{Username: a.Username, Password: a.Password}
	}
	for _, t := range raw.Tools {
		if t.Name == "" || len(t.Name) > 128 || strings.ContainsAny(t.Name, " \t\n\x00") {
			return bad("tools: %q is not a tool name", switchboard.Clip(t.Name))
		}
		e.Tools = append(e.Tools, t.Name)
	}
	if len(raw.Command) > hosted.MaxArgs {
		return bad("at most %d command arguments", hosted.MaxArgs)
	}
	if usesTemplates(raw) {
		return nil, fmt.Sprintf("catalog server %q skipped: it uses {{...}} templates (Docker's per-user configuration), which Switchboard does not fill in; write the values, or ${SECRET} in env for a project secret", name), nil
	}
	for _, a := range raw.Command {
		if strings.ContainsRune(a, 0) {
			return bad("command arguments must not hold NUL characters")
		}
	}
	if strings.ContainsAny(raw.User, " \t\n\x00") {
		return bad("user %q is not a user name or uid[:gid]", switchboard.Clip(raw.User))
	}
	if rootUser(raw.User) {
		return bad("user %q is root; a catalog server runs as the image's user or a non-root one (\"1000:1000\")", switchboard.Clip(raw.User))
	}
	for _, v := range raw.Env {
		if !hosted.EnvName.MatchString(v.Name) {
			return bad("env name %q must be letters, digits and '_', not starting with a digit", switchboard.Clip(v.Name))
		}
		if strings.ContainsRune(v.Value, 0) {
			return bad("env %s must not hold NUL characters", v.Name)
		}
		if _, dup := e.Env[v.Name]; dup {
			return bad("env %s is listed twice", v.Name)
		}
		e.Env[v.Name] = v.Value
	}
	for _, s := range raw.Secrets {
		if !hosted.EnvName.MatchString(s.Env) {
			return bad("secret %q: env %q must be a variable name", switchboard.Clip(s.Name), switchboard.Clip(s.Env))
		}
		if s.Name == "" {
			return bad("secret for %s: name is required", s.Env)
		}
		if _, dup := e.Env[s.Env]; dup {
			return bad("%s is set both by env and by a secret", s.Env)
		}
		if _, dup := e.Secrets[s.Env]; dup {
			return bad("%s is set by two secrets", s.Env)
		}
		e.Secrets[s.Env] = SecretName(s.Name)
	}
	if len(e.Env)+len(e.Secrets) > hosted.MaxEnv {
		return bad("at most %d environment variables", hosted.MaxEnv)
	}
	if len(raw.Volumes) > hosted.MaxVolumes {
		return bad("at most %d volumes", hosted.MaxVolumes)
	}
	for _, v := range raw.Volumes {
		vol, err := catalogVolume(v)
		if err != nil {
			return bad("volume %q: %s", switchboard.Clip(v), err)
		}
		e.Volumes = append(e.Volumes, vol)
	}
	return e, "", nil
}

// usesTemplates reports whether an entry relies on Docker's {{...}}
// per-user configuration anywhere Switchboard would pass it on.
func usesTemplates(raw catalogEntry) bool {
	for _, a := range raw.Command {
		if strings.Contains(a, "{{") {
			return true
		}
	}
	for _, v := range raw.Env {
		if strings.Contains(v.Value, "{{") {
			return true
		}
	}
	for _, v := range raw.Volumes {
		if strings.Contains(v, "{{") {
			return true
		}
	}
	return false
}

// catalogVolume reads "name:/path" or "name:/path:ro". Host paths are
// refused: the catalog never mounts the gateway's filesystem.
func catalogVolume(v string) (CatalogVolume, error) {
	parts := strings.Split(v, ":")
	var vol CatalogVolume
	switch {
	case len(parts) == 3 && (parts[2] == "ro" || parts[2] == "rw"):
		vol.ReadOnly = parts[2] == "ro"
	case len(parts) != 2:
		return vol, errors.New(`must be "volume-name:/container/path" (optionally ":ro")`)
	}
	vol.Name, vol.Target = parts[0], parts[1]
	if strings.HasPrefix(vol.Name, "/") || strings.HasPrefix(vol.Name, ".") || strings.HasPrefix(vol.Name, "~") {
		return vol, errors.New("host paths are not mounted; name a Docker volume (each project gets its own, created when missing and kept)")
	}
	if !catalogVolumeName.MatchString(vol.Name) {
		return vol, errors.New("the volume name must be letters, digits, '_', '.', '-'")
	}
	if msg := hosted.ContainerPathProblem(vol.Target); msg != "" {
		return vol, errors.New("the container path " + msg)
	}
	return vol, nil
}

// rootUser reports whether a container user (name, uid, or either with
// ":group") is root: "root", "0", "0:0", "root:staff", "00".
func rootUser(u string) bool {
	name, _, _ := strings.Cut(u, ":")
	return name == "root" || (name != "" && strings.Trim(name, "0") == "")
}

func invalid(format string, args ...any) error {
	return switchboard.Errorf(switchboard.ErrInvalid, format, args...)
}

// SecretName is the project secret a catalog secret name reads: Docker's
// dotted names ("github.personal_access_token") with every character a
// secret name cannot hold replaced by '_' ("github_personal_access_token").
func SecretName(name string) string {
	return secretNameChars.ReplaceAllString(name, "_")
}

package hosted

import (
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/engine"
)

// Defaults of a hosted server's limits, as the issue fixes them.
const (
	DefaultCPU         = 0.5
	DefaultMemoryBytes = 512 << 20
	DefaultDiskBytes   = 1 << 30
	DefaultPids        = 256
	DefaultCallTimeout = 30 * time.Second
)

// Bounds on what a registration (or a catalog entry) may ask for.
const (
	MaxVolumes = 16
	MaxEnv     = 256
	MaxArgs    = 256
)

// Patterns of a server name, an environment variable's name and an image
// reference, in a registration or a catalog entry.
var (
	ValidName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	EnvName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	// ImageRef is loose on purpose (the engine has the last word) but
	// refuses whitespace and control characters, which no reference has.
	ImageRef    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$`)
	networkName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	// RuntimeName is a container runtime's name as the engine lists it
	// ("auto" included).
	RuntimeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// Restart policies.
const (
	PolicyAlways    = "always"
	PolicyOnFailure = "on-failure"
	PolicyNever     = "never"
)

// plan is a validated registration with its defaults applied and sizes
// parsed: everything the supervisor needs to build a container.
type plan struct {
	reg          switchboard.HostedRegistration
	stdio        bool
	readOnlyRoot bool
	nanoCPUs     int64
	memoryBytes  int64
	diskBytes    int64
	callTimeout  time.Duration
	network      string // "" = none
}

// Validate checks a registration as a user wrote it and returns it with
// its defaults filled in. Errors wrap switchboard.ErrInvalid and name the
// field to fix. It does not look at the engine or the store.
func Validate(reg switchboard.HostedRegistration) (switchboard.HostedRegistration, error) {
	p, err := newPlan(reg)
	if err != nil {
		return reg, err
	}
	return p.reg, nil
}

func invalid(format string, args ...any) error {
	return switchboard.Errorf(switchboard.ErrInvalid, format, args...)
}

func newPlan(reg switchboard.HostedRegistration) (plan, error) {
	var p plan
	if reg.Name == "" {
		return p, invalid("name is required")
	}
	if !ValidName.MatchString(reg.Name) {
		return p, invalid("name %q must be 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit", switchboard.Clip(reg.Name))
	}
	n := reg.Name
	if reg.Image == "" {
		return p, invalid("hosted server %q: image is required (an image reference, such as \"mcp/fetch:1.0\": pulled from its registry when the Docker engine lacks it, as pull_policy says)", n)
	}
	if !ImageRef.MatchString(reg.Image) {
		return p, invalid("hosted server %q: image %q is not a valid image reference", n, switchboard.Clip(reg.Image))
	}
	if strings.ContainsAny(reg.Command, "\x00\n") {
		return p, invalid("hosted server %q: command must be one line of text", n)
	}
	if len(reg.Args) > MaxArgs {
		return p, invalid("hosted server %q: at most %d args", n, MaxArgs)
	}
	for _, a := range reg.Args {
		if strings.ContainsRune(a, 0) {
			return p, invalid("hosted server %q: args must not hold NUL characters", n)
		}
	}
	p.stdio = reg.StdioBridge == nil || *reg.StdioBridge
	p.reg.StdioBridge = new(p.stdio)
	if p.stdio {
		if reg.Port != 0 {
			return p, invalid("hosted server %q: port is only for \"stdio_bridge\": false (an HTTP MCP server in the container)", n)
		}
		if reg.Path != "" {
			return p, invalid("hosted server %q: path is only for \"stdio_bridge\": false", n)
		}
	} else {
		if reg.Port < 1 || reg.Port > 65535 {
			return p, invalid("hosted server %q: \"stdio_bridge\": false needs the container port of its HTTP MCP endpoint (1-65535) in port", n)
		}
		if reg.Path == "" {
			reg.Path = "/mcp"
		}
		if !strings.HasPrefix(reg.Path, "/") || strings.ContainsAny(reg.Path, " \t\r\n\x00?#") {
			return p, invalid("hosted server %q: path must be an absolute URL path such as \"/mcp\"", n)
		}
		if reg.Network == "" || reg.Network == "none" {
			return p, invalid("hosted server %q: \"stdio_bridge\": false needs a network to reach the container; set \"network\": \"bridge\"", n)
		}
	}
	switch reg.RestartPolicy {
	case "":
		reg.RestartPolicy = PolicyOnFailure
	case PolicyAlways, PolicyOnFailure, PolicyNever:
	default:
		return p, invalid("hosted server %q: restart_policy %q is not one of \"always\", \"on-failure\", \"never\"", n, switchboard.Clip(reg.RestartPolicy))
	}
	if len(reg.Environment) > MaxEnv {
		return p, invalid("hosted server %q: at most %d environment variables", n, MaxEnv)
	}
	for k, v := range reg.Environment {
		if !EnvName.MatchString(k) {
			return p, invalid("hosted server %q: environment variable name %q must be letters, digits and '_', not starting with a digit", n, switchboard.Clip(k))
		}
		if strings.ContainsRune(v, 0) {
			return p, invalid("hosted server %q: environment variable %s must not hold NUL characters", n, k)
		}
	}
	var err error
	if p.nanoCPUs, p.memoryBytes, p.diskBytes, err = parseLimits(n, reg.Limits); err != nil {
		return p, err
	}
	// Volumes: absolute container paths, unique, not the root.
	if len(reg.Volumes) > MaxVolumes {
		return p, invalid("hosted server %q: at most %d volumes", n, MaxVolumes)
	}
	var vols []string
	for _, v := range reg.Volumes {
		if msg := ContainerPathProblem(v); msg != "" {
			return p, invalid("hosted server %q: volume %q %s (a container path; host paths are never mounted)", n, switchboard.Clip(v), msg)
		}
		c := path.Clean(v)
		if slices.Contains(vols, c) {
			return p, invalid("hosted server %q: volume %q is listed twice", n, c)
		}
		vols = append(vols, c)
	}
	reg.Volumes = vols
	switch reg.Network {
	case "", "none":
		reg.Network = "none"
	case "host":
		return p, invalid("hosted server %q: network \"host\" is not allowed; use \"bridge\" or a named network", n)
	default:
		if !networkName.MatchString(reg.Network) {
			return p, invalid("hosted server %q: network %q must be \"none\", \"bridge\" or a Docker network name", n, switchboard.Clip(reg.Network))
		}
		p.network = reg.Network
	}
	p.readOnlyRoot = reg.ReadOnlyRoot == nil || *reg.ReadOnlyRoot
	reg.ReadOnlyRoot = new(p.readOnlyRoot)
	p.callTimeout = DefaultCallTimeout
	if reg.CallTimeout != "" {
		d, err := time.ParseDuration(reg.CallTimeout)
		if err != nil || d <= 0 || d > config.MaxCallTimeout {
			return p, invalid("hosted server %q: call_timeout %q must be a positive duration up to 1h, such as \"45s\"", n, switchboard.Clip(reg.CallTimeout))
		}
		p.callTimeout = d
	}
	if reg.ToolPrefix != "" && !ValidName.MatchString(reg.ToolPrefix) {
		return p, invalid("hosted server %q: tool_prefix %q must be letters, digits, '_', '-', '.'", n, switchboard.Clip(reg.ToolPrefix))
	}
	if reg.Runtime != "" && !RuntimeName.MatchString(reg.Runtime) {
		return p, invalid("hosted server %q: runtime %q must be \"auto\" or a container runtime's name (\"runc\", \"runsc\")", n, switchboard.Clip(reg.Runtime))
	}
	if reg.Origin != "" && reg.Origin != "file" {
		return p, invalid("hosted server %q: origin is set by the gateway; leave it out", n)
	}
	if reg.PullPolicy != "" {
		if _, err := engine.ParsePullPolicy(reg.PullPolicy); err != nil {
			return p, invalid("hosted server %q: pull_policy %q: want if-not-present, always or never", n, switchboard.Clip(reg.PullPolicy))
		}
	}
	if a := reg.RegistryAuth; a != nil {
		if !WholeRef.MatchString(a.Username) || !WholeRef.MatchString(a.Password) {
			return p, invalid("hosted server %q: registry_auth takes the username and password from the project's secrets: write each as a ${NAME} reference, such as {\"username\": \"${REGISTRY_USER}\", \"password\": \"${REGISTRY_TOKEN}\"}", n)
		}
	}
	reg.StdioBridge = p.reg.StdioBridge
	p.reg = reg
	return p, nil
}

// WholeRef is a value that is exactly one `${NAME}` reference.
var WholeRef = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`)

// refValues are the registration's values that may reference secrets:
// its environment, and its registry credentials.
func refValues(reg switchboard.HostedRegistration) map[string]string {
	if reg.RegistryAuth == nil {
		return reg.Environment
	}
	out := make(map[string]string, len(reg.Environment)+2)
	for k, v := range reg.Environment {
		out[k] = v
	}
	out["\x00registry_username"], out["\x00registry_password"] = reg.RegistryAuth.Username, reg.RegistryAuth.Password
	return out
}

// secretRefs lists the `${NAME}` references of a registration's
// environment values (defaults after ":-" make a reference optional).
func secretRefs(env map[string]string) []string {
	var out []string
	for _, v := range env {
		for _, m := range secretRef.FindAllStringSubmatch(v, -1) {
			if m[2] == "" && !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	slices.Sort(out)
	return out
}

var secretRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// summary is the registration without secret values.
func (p plan) summary() switchboard.HostedConfigSummary {
	env := make([]string, 0, len(p.reg.Environment))
	for k := range p.reg.Environment {
		env = append(env, k)
	}
	slices.Sort(env)
	return switchboard.HostedConfigSummary{
		Command: p.reg.Command, Args: p.reg.Args, StdioBridge: p.stdio, Port: p.reg.Port,
		RestartPolicy: p.reg.RestartPolicy, Environment: env, Volumes: p.reg.Volumes, Network: p.reg.Network,
		ReadOnlyRoot: p.readOnlyRoot, CallTimeout: p.callTimeout.String(), ToolPrefix: p.reg.ToolPrefix, Runtime: p.reg.Runtime, Origin: p.reg.Origin,
		PullPolicy: p.reg.PullPolicy, RegistryAuth: p.reg.RegistryAuth,
	}
}

// ContainerPathProblem says what is wrong with a volume's container path,
// or "": it must be absolute and clean ("/data", not "data" or
// "/data/../etc"), and not "/" or the kernel's filesystems (/proc, /sys,
// /dev) or anything under them, where a volume would hide or replace what
// the runtime mounts there.
func ContainerPathProblem(p string) string {
	switch {
	case !strings.HasPrefix(p, "/") || strings.ContainsAny(p, ":,\x00\n"):
		return "must be an absolute path such as \"/data\""
	case path.Clean(p) != p:
		return "must be written clean, as " + strconv.Quote(path.Clean(p))
	case p == "/":
		return "must not be \"/\""
	}
	for _, sys := range []string{"/proc", "/sys", "/dev"} {
		if p == sys || strings.HasPrefix(p, sys+"/") {
			return "must not be " + sys + " or under it"
		}
	}
	return ""
}

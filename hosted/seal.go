package hosted

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard"
)

// Sealer encrypts values for the store under the gateway's secret key
// (secrets.Box), bound to a project and a name.
type Sealer interface {
	Seal(projectID, name string, plaintext []byte) ([]byte, error)
	Open(projectID, name string, ciphertext []byte) ([]byte, error)
}

// storedRegistration is a registration as its row's Config holds it. An
// environment value that is only `${NAME}` references stays in
// Environment as written (it holds no value); every other value (a
// literal, "Bearer ${TOKEN}", "${A:-default}") moves to
// SealedEnvironment, sealed like a project secret, so the store never
// holds a literal value in clear. Rows written before sealing hold every
// value in Environment; they are read as they are and rewritten sealed at
// start.
type storedRegistration struct {
	switchboard.HostedRegistration
	SealedEnvironment map[string][]byte `json:"sealed_environment,omitempty"`
	// SecretRefs names every project secret the environment references,
	// sealed values included, so the API can tell who may change a secret
	// (server/api secretOfCommand) without opening anything.
	SecretRefs []string `json:"secret_refs,omitempty"`
}

// sealName is the Sealer slot of a hosted server's environment variable.
// ':' is not a secret-name character, so it never shares a project
// secret's slot.
func sealName(server, variable string) string { return "hosted:" + server + ":" + variable }

// onlyRefs reports whether v is nothing but `${NAME}` references
// (without defaults), or empty.
func onlyRefs(v string) bool {
	rest := secretRef.ReplaceAllStringFunc(v, func(m string) string {
		if strings.Contains(m, ":-") {
			return m
		}
		return ""
	})
	return rest == ""
}

// encodeRow is reg (with literal values in clear, as a plan holds it) as
// project's row stores it. With no sealer (tests) values stay in clear.
func encodeRow(box Sealer, project string, reg switchboard.HostedRegistration) ([]byte, error) {
	row := storedRegistration{HostedRegistration: reg}
	if box != nil && len(reg.Environment) > 0 {
		row.Environment = map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(reg.Environment)) {
			v := reg.Environment[k]
			if onlyRefs(v) {
				row.Environment[k] = v
				continue
			}
			sealed, err := box.Seal(project, sealName(reg.Name, k), []byte(v))
			if err != nil {
				return nil, err
			}
			if row.SealedEnvironment == nil {
				row.SealedEnvironment = map[string][]byte{}
			}
			row.SealedEnvironment[k] = sealed
		}
		if len(row.Environment) == 0 {
			row.Environment = nil
		}
	}
	row.SecretRefs = allRefs(refValues(reg))
	return json.Marshal(row)
}

// allRefs lists every `${NAME}` of env's values, with or without default.
func allRefs(env map[string]string) []string {
	var out []string
	for _, v := range env {
		for _, m := range secretRef.FindAllStringSubmatch(v, -1) {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// decodeRow reads the registration stored in a row's Config, opening its
// sealed values. inClear reports a literal value stored in clear (a row
// written before sealing), which the caller rewrites.
func decodeRow(box Sealer, w switchboard.Workspace) (p plan, inClear bool, err error) {
	var row storedRegistration
	if err := json.Unmarshal(w.Config, &row); err != nil {
		return plan{}, false, switchboard.Errorf(switchboard.ErrConfig, "hosted server row %s: stored configuration is not a registration", w.ID)
	}
	reg := row.HostedRegistration
	for _, v := range reg.Environment {
		if !onlyRefs(v) {
			inClear = true
		}
	}
	if len(row.SealedEnvironment) > 0 {
		if box == nil {
			return plan{}, false, switchboard.Errorf(switchboard.ErrConfig, "hosted server %q: its environment is sealed and this gateway has no secret key", reg.Name)
		}
		env := maps.Clone(reg.Environment)
		if env == nil {
			env = map[string]string{}
		}
		for _, k := range slices.Sorted(maps.Keys(row.SealedEnvironment)) {
			if _, dup := env[k]; dup {
				return plan{}, false, switchboard.Errorf(switchboard.ErrConfig, "hosted server %q: environment variable %s is stored twice", reg.Name, k)
			}
			v, err := box.Open(w.ProjectID, sealName(reg.Name, k), row.SealedEnvironment[k])
			if err != nil {
				return plan{}, false, switchboard.Errorf(err, "hosted server %q: environment variable %s cannot be read: %s", reg.Name, k, switchboard.Message(err))
			}
			env[k] = string(v)
		}
		reg.Environment = env
	}
	p, err = newPlan(reg)
	return p, inClear, err
}

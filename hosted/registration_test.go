package hosted

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
)

func TestValidateDefaults(t *testing.T) {
	p, err := newPlan(switchboard.HostedRegistration{Name: "notes", Image: "example/notes:1"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.stdio || !p.readOnlyRoot || p.nanoCPUs != 500_000_000 || p.memoryBytes != 512<<20 || p.diskBytes != 1<<30 ||
		p.callTimeout != DefaultCallTimeout || p.network != "" || p.reg.RestartPolicy != PolicyOnFailure || p.reg.Network != "none" {
		t.Errorf("defaults not applied: %+v", p)
	}
}

func TestValidateRefuses(t *testing.T) {
	ok := switchboard.HostedRegistration{Name: "n", Image: "img:1"}
	with := func(f func(*switchboard.HostedRegistration)) switchboard.HostedRegistration {
		r := ok
		f(&r)
		return r
	}
	for name, reg := range map[string]switchboard.HostedRegistration{
		"no name":        with(func(r *switchboard.HostedRegistration) { r.Name = "" }),
		"bad name":       with(func(r *switchboard.HostedRegistration) { r.Name = "a b" }),
		"no image":       with(func(r *switchboard.HostedRegistration) { r.Image = "" }),
		"bad image":      with(func(r *switchboard.HostedRegistration) { r.Image = "a b" }),
		"cpu negative":   with(func(r *switchboard.HostedRegistration) { r.Limits.CPU = "-1" }),
		"cpu overflow":   with(func(r *switchboard.HostedRegistration) { r.Limits.CPU = "99999999999" }),
		"memory word":    with(func(r *switchboard.HostedRegistration) { r.Limits.Memory = "lots" }),
		"memory tiny":    with(func(r *switchboard.HostedRegistration) { r.Limits.Memory = "1k" }),
		"disk word":      with(func(r *switchboard.HostedRegistration) { r.Limits.Disk = "big" }),
		"policy":         with(func(r *switchboard.HostedRegistration) { r.RestartPolicy = "sometimes" }),
		"env name":       with(func(r *switchboard.HostedRegistration) { r.Environment = map[string]string{"1X": "v"} }),
		"volume rel":     with(func(r *switchboard.HostedRegistration) { r.Volumes = []string{"data"} }),
		"volume root":    with(func(r *switchboard.HostedRegistration) { r.Volumes = []string{"/"} }),
		"volume bind":    with(func(r *switchboard.HostedRegistration) { r.Volumes = []string{"/host:/data"} }),
		"volume twice":   with(func(r *switchboard.HostedRegistration) { r.Volumes = []string{"/data", "/data"} }),
		"volume unclean": with(func(r *switchboard.HostedRegistration) { r.Volumes = []string{"/data/../etc"} }),
		"volume /proc":   with(func(r *switchboard.HostedRegistration) { r.Volumes = []string{"/proc"} }),
		"volume /sys/x":  with(func(r *switchboard.HostedRegistration) { r.Volumes = []string{"/sys/fs/cgroup"} }),
		"volume /dev":    with(func(r *switchboard.HostedRegistration) { r.Volumes = []string{"/dev"} }),
		"timeout huge":   with(func(r *switchboard.HostedRegistration) { r.CallTimeout = "999999h" }),
		"host network":   with(func(r *switchboard.HostedRegistration) { r.Network = "host" }),
		"timeout":        with(func(r *switchboard.HostedRegistration) { r.CallTimeout = "soon" }),
		"port on stdio":  with(func(r *switchboard.HostedRegistration) { r.Port = 80 }),
		"http no port":   with(func(r *switchboard.HostedRegistration) { r.StdioBridge = new(false) }),
		"http no net":    with(func(r *switchboard.HostedRegistration) { r.StdioBridge = new(false); r.Port = 80 }),
		"origin by user": with(func(r *switchboard.HostedRegistration) { r.Origin = "api" }),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := newPlan(reg); !errors.Is(err, switchboard.ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
	// What is refused is named, not only refused.
	for v, want := range map[string]string{"/proc/sys": "/proc or under it", "/data/": `as "/data"`, "data": "absolute"} {
		_, err := newPlan(with(func(r *switchboard.HostedRegistration) { r.Volumes = []string{v} }))
		if msg := switchboard.Message(err); !strings.Contains(msg, "volume") || !strings.Contains(msg, want) {
			t.Errorf("volume %q: %q, want the field and %q", v, msg, want)
		}
	}
}

func TestSecretRefs(t *testing.T) {
	got := secretRefs(map[string]string{"A": "${TOKEN}", "B": "x-${OTHER}-${TOKEN}", "C": "${OPT:-dflt}", "D": "plain"})
	if len(got) != 2 || got[0] != "OTHER" || got[1] != "TOKEN" {
		t.Errorf("secretRefs = %v, want [OTHER TOKEN]", got)
	}
}

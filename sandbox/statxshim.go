package sandbox

import (
	"context"
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/switchboard-mcp/switchboard"
)

// statxShimC is a preload library for the sandbox image: it drops
// AT_NO_AUTOMOUNT from statx(2), which Debian 12's gVisor (runsc
// 20221219) refuses with EINVAL, so coreutils' ls -l and stat fail on
// every path there. Nothing in a sandbox is an automount point, so the
// flag changes nothing under runc.
//
//go:embed statx_shim.c.txt
var statxShimC string

// statxShimPath is where the image holds the shim (named in
// /etc/ld.so.preload).
const statxShimPath = "usr/lib/switchboard/statx_shim.so"

// buildStatxShim compiles the shim with the host's C compiler (cc). The
// image's C library is Debian 12's, as the host's where the builder runs
// apt-get; the shim needs only syscall(2) from it. Errors: ErrConfig when
// there is no C compiler or it fails.
func buildStatxShim(ctx context.Context) ([]byte, error) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return nil, switchboard.Errorf(switchboard.ErrConfig, "no C compiler (cc) to build the statx shim; install gcc")
	}
	dir, err := os.MkdirTemp("", "switchboard-shim-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	src, out := filepath.Join(dir, "statx_shim.c"), filepath.Join(dir, "statx_shim.so")
	if err := os.WriteFile(src, []byte(statxShimC), 0o644); err != nil {
		return nil, err
	}
	if _, err := runTool(ctx, cc, "-shared", "-fPIC", "-O2", "-Wall", "-o", out, src); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}

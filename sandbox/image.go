package sandbox

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// builderVersion is part of the image tag: bump it whenever the rootfs the
// builder assembles changes for the same packages (files added, users,
// image settings), so a stale cached image is never reused.
const builderVersion = "4"

// ImageRepository is the repository the builder tags its images in.
const ImageRepository = "switchboard-sandbox"

// DefaultPackages are the Debian packages of the sandbox image: a shell,
// coreutils (timeout, sleep, cat...), grep, sed, find, tar, gzip, ps and
// kill (procps), Python 3 and Node.js, with their dependency closure.
var DefaultPackages = []string{"bash", "dash", "coreutils", "grep", "sed", "findutils", "tar", "gzip", "procps", "python3", "nodejs"}

// SandboxUID is the unprivileged user every sandbox process runs as.
const SandboxUID = 1000

// imageEngine is what the builder needs from the engine.
type imageEngine interface {
	ImageExists(ctx context.Context, ref string) (bool, error)
	ImportImage(ctx context.Context, rootfs io.Reader, ref string, changes []string) error
}

// Builder assembles the sandbox image from Debian packages with apt-get
// and dpkg-deb, and imports it into the engine: no registry is involved.
type Builder struct {
	Engine imageEngine
	// CacheDir keeps the downloaded .deb files (named by package and
	// version, so a new version is a new file). "" means
	// os.UserCacheDir()/switchboard/sandbox-debs.
	CacheDir string
	Packages []string // nil: DefaultPackages
	Logger   *slog.Logger
}

// Package is one resolved Debian package.
type Package struct{ Name, Version string }

// BuildResult says which image Build produced.
type BuildResult struct {
	Ref      string
	Reused   bool // the engine had it already; nothing was downloaded
	Packages []Package
}

// Build resolves the package closure, derives the tag from it, and
// returns at once when the engine has that image; otherwise it downloads
// the missing .debs into the cache, assembles the root filesystem as a
// tar and imports it. Errors: ErrConfig when apt-get or dpkg-deb are
// missing or fail (the message says what to install or check), the
// engine's errors for the import.
func (b *Builder) Build(ctx context.Context) (BuildResult, error) {
	log := b.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cache, err := b.cacheDir()
	if err != nil {
		return BuildResult{}, err
	}
	pkgs, err := b.resolve(ctx, cache)
	if err != nil {
		return BuildResult{}, err
	}
	shim, err := buildStatxShim(ctx)
	if err != nil {
		// ls -l and stat then fail under Debian's runsc, whose probe
		// says so: sessions fall back to runc where auto chose.
		log.Warn("sandbox image: no statx shim for gVisor (ls -l and stat will fail under Debian 12's runsc)", "err", err)
	}
	ref := ImageRepository + ":" + imageTag(pkgs, shim != nil)
	res := BuildResult{Ref: ref, Packages: pkgs}
	if ok, err := b.Engine.ImageExists(ctx, ref); err != nil {
		return res, err
	} else if ok {
		res.Reused = true
		return res, nil
	}
	start := time.Now()
	if err := b.download(ctx, cache); err != nil {
		return res, err
	}
	log.Info("sandbox image: packages ready", "packages", len(pkgs), "elapsed", time.Since(start).Round(time.Millisecond))
	debs, err := debFiles(cache, pkgs)
	if err != nil {
		return res, err
	}
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		err := writeRootfs(ctx, pw, debs, shim)
		pw.CloseWithError(err)
		errc <- err
	}()
	changes := []string{
		fmt.Sprintf("USER %d:%d", SandboxUID, SandboxUID),
		"WORKDIR /workspace",
		"ENV HOME=/workspace",
		"ENV PATH=/usr/local/bin:/usr/bin:/bin",
		"ENV LANG=C.UTF-8",
		`CMD ["sleep","infinity"]`,
	}
	ierr := b.Engine.ImportImage(ctx, pr, ref, changes)
	pr.CloseWithError(errors.New("import finished"))
	werr := <-errc
	if ierr != nil {
		return res, ierr
	}
	if werr != nil {
		return res, werr
	}
	log.Info("sandbox image: imported", "ref", ref, "elapsed", time.Since(start).Round(time.Millisecond))
	return res, nil
}

// ImageTag is the content hash naming an image built from pkgs by this
// builder version: the first 12 hex digits of sha256 over the sorted
// name=version list.
func ImageTag(pkgs []Package) string { return imageTag(pkgs, true) }

// imageTag is ImageTag for an image with or without the statx shim.
func imageTag(pkgs []Package, shim bool) string {
	lines := make([]string, len(pkgs))
	for i, p := range pkgs {
		lines[i] = p.Name + "=" + p.Version
	}
	slices.Sort(lines)
	h := sha256.New()
	fmt.Fprintf(h, "builder %s\n", builderVersion)
	if shim {
		fmt.Fprintf(h, "statx shim %x\n", sha256.Sum256([]byte(statxShimC)))
	}
	for _, l := range lines {
		fmt.Fprintln(h, l)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func (b *Builder) cacheDir() (string, error) {
	dir := b.CacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", switchboard.Errorf(switchboard.ErrConfig, "sandbox image: no cache directory (set XDG_CACHE_HOME or HOME): %v", err)
		}
		dir = filepath.Join(base, "switchboard", "sandbox-debs")
	}
	if err := os.MkdirAll(filepath.Join(dir, "partial"), 0o755); err != nil {
		return "", switchboard.Errorf(switchboard.ErrConfig, "sandbox image: cache directory: %v", err)
	}
	// An empty dpkg status makes apt resolve the full closure from the
	// archive, ignoring what the host happens to have installed (a
	// locally installed nodejs from another repository, for one).
	if err := os.WriteFile(filepath.Join(dir, "empty-status"), nil, 0o644); err != nil {
		return "", switchboard.Errorf(switchboard.ErrConfig, "sandbox image: cache directory: %v", err)
	}
	return dir, nil
}

func (b *Builder) packages() []string {
	if len(b.Packages) > 0 {
		return b.Packages
	}
	return DefaultPackages
}

// aptArgs points apt at an empty dpkg status and at the cache, without
// touching the host's apt caches or locks.
func aptArgs(cache string) []string {
	return []string{
		"-q", "-y",
		"-o", "Dir::State::status=" + filepath.Join(cache, "empty-status"),
		"-o", "Dir::Cache::archives=" + cache,
		"-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache=",
		"-o", "Debug::NoLocking=1",
		"-o", "APT::Install-Recommends=false",
	}
}

// resolve asks apt (simulating an install on an empty system) for the
// exact closure: names and versions.
func (b *Builder) resolve(ctx context.Context, cache string) ([]Package, error) {
	args := append(aptArgs(cache), "-s", "install")
	args = append(args, b.packages()...)
	out, err := runTool(ctx, "apt-get", args...)
	if err != nil {
		return nil, err
	}
	var pkgs []Package
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// Inst libc6 (2.36-9+deb12u14 Debian:12.11/stable [amd64])
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[0] != "Inst" || !strings.HasPrefix(f[2], "(") {
			continue
		}
		pkgs = append(pkgs, Package{Name: f[1], Version: strings.TrimPrefix(f[2], "(")})
	}
	if len(pkgs) == 0 {
		return nil, switchboard.Errorf(switchboard.ErrConfig, "sandbox image: apt-get resolved no packages for %v; run apt-get update", b.packages())
	}
	return pkgs, nil
}

// download fetches the .debs not yet in the cache.
func (b *Builder) download(ctx context.Context, cache string) error {
	args := append(aptArgs(cache), "--download-only", "install")
	args = append(args, b.packages()...)
	_, err := runTool(ctx, "apt-get", args...)
	return err
}

// debFiles finds each package's file in the cache as apt names it:
// name_version_arch.deb with the epoch colon escaped as %3a.
func debFiles(cache string, pkgs []Package) ([]string, error) {
	var files []string
	for _, p := range pkgs {
		v := strings.ReplaceAll(p.Version, ":", "%3a")
		m, _ := filepath.Glob(filepath.Join(cache, globEscape(p.Name+"_"+v+"_")+"*.deb"))
		if len(m) == 0 {
			return nil, switchboard.Errorf(switchboard.ErrConfig, "sandbox image: %s %s was not downloaded", p.Name, p.Version)
		}
		files = append(files, m[0])
	}
	return files, nil
}

func globEscape(s string) string {
	r := strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`, `\`, `\\`)
	return r.Replace(s)
}

// writeRootfs writes the image's root filesystem as one tar: every
// package's data (dpkg-deb --fsys-tarfile, in order; a directory already
// written is skipped), then what maintainer scripts would have made: the
// users, /bin/sh, /workspace and /tmp.
func writeRootfs(ctx context.Context, w io.Writer, debs []string, shim []byte) error {
	tw := tar.NewWriter(w)
	seen := map[string]bool{}
	for _, deb := range debs {
		if err := copyDeb(ctx, tw, deb, seen); err != nil {
			return err
		}
	}
	mtime := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	dir := func(name string, mode int64, uid int) error {
		if seen[name] {
			return nil
		}
		seen[name] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: mtime})
	}
	file := func(name, body string) error {
		seen[name] = true
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := io.WriteString(tw, body)
		return err
	}
	u := SandboxUID
	steps := []func() error{
		func() error { return dir("etc", 0o755, 0) },
		func() error {
			return file("etc/passwd", fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\nsandbox:x:%d:%d:sandbox:/workspace:/bin/bash\n", u, u))
		},
		func() error {
			return file("etc/group", fmt.Sprintf("root:x:0:\nnogroup:x:65534:\nsandbox:x:%d:\n", u))
		},
		func() error { return file("etc/hostname", "sandbox\n") },
		func() error { return dir("tmp", 0o1777, 0) },
		func() error { return dir("workspace", 0o755, u) },
		func() error { return dir("usr/local/bin", 0o755, 0) },
	}
	if shim != nil {
		steps = append(steps,
			func() error { return dir("usr/lib/switchboard", 0o755, 0) },
			func() error {
				seen[statxShimPath] = true
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: statxShimPath, Mode: 0o755, Size: int64(len(shim)), ModTime: mtime}); err != nil {
					return err
				}
				_, err := tw.Write(shim)
				return err
			},
			func() error { return file("etc/ld.so.preload", "/"+statxShimPath+"\n") })
	}
	if !seen["bin/sh"] && !seen["usr/bin/sh"] {
		steps = append(steps, func() error {
			seen["bin/sh"] = true
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/sh", Linkname: "dash", Mode: 0o777, ModTime: mtime})
		})
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return tw.Close()
}

// copyDeb appends one package's files to tw.
func copyDeb(ctx context.Context, tw *tar.Writer, deb string, seen map[string]bool) error {
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", deb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return toolError("dpkg-deb", err, "")
	}
	tr := tar.NewReader(out)
	var copyErr error
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			copyErr = fmt.Errorf("reading %s: %w", filepath.Base(deb), err)
			break
		}
		name := strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")
		if name == "" || name == "." {
			continue
		}
		key := strings.TrimSuffix(name, "/")
		if h.Typeflag == tar.TypeDir && seen[key] {
			continue
		}
		seen[key] = true
		h.Name = name
		if h.Typeflag == tar.TypeLink {
			h.Linkname = strings.TrimPrefix(strings.TrimPrefix(h.Linkname, "./"), "/")
		}
		h.Uname, h.Gname = "", ""
		if err := tw.WriteHeader(h); err != nil {
			copyErr = err
			break
		}
		if _, err := io.Copy(tw, tr); err != nil {
			copyErr = err
			break
		}
	}
	if copyErr != nil {
		_ = cmd.Process.Kill()
	} else {
		_, _ = io.Copy(io.Discard, out)
	}
	if err := cmd.Wait(); err != nil && copyErr == nil {
		return toolError("dpkg-deb", err, stderr.String())
	}
	return copyErr
}

// runTool runs an apt/dpkg tool and returns its stdout.
func runTool(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, toolError(name, err, stderr.String())
	}
	return out, nil
}

func toolError(name string, err error, stderr string) error {
	if errors.Is(err, exec.ErrNotFound) {
		return switchboard.Errorf(switchboard.ErrConfig, "sandbox image: %s not found: build the image on a Debian or Ubuntu host (apt-get and dpkg-deb are needed), or set MCP_SERVER_SANDBOX_IMAGE_PYTHON and MCP_SERVER_SANDBOX_IMAGE_NODE to an existing image", name)
	}
	stderr = strings.TrimSpace(stderr)
	if len(stderr) > 2000 {
		stderr = stderr[len(stderr)-2000:]
	}
	return switchboard.Errorf(switchboard.ErrConfig, "sandbox image: %s failed (%v): %s", name, err, stderr)
}

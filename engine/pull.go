package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/api/pkg/authconfig"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"

	"github.com/switchboard-mcp/switchboard"
)

// PullPolicy says when an image is pulled from its registry.
type PullPolicy string

// Pull policies.
const (
	PullIfNotPresent PullPolicy = "if-not-present" // pull only an image the engine lacks (default)
	PullAlways       PullPolicy = "always"         // pull on every start: a moved tag is followed
	PullNever        PullPolicy = "never"          // never pull: the image must be on the engine
)

// ParsePullPolicy reads a policy; "" is PullIfNotPresent.
func ParsePullPolicy(s string) (PullPolicy, error) {
	switch p := PullPolicy(strings.TrimSpace(s)); p {
	case "":
		return PullIfNotPresent, nil
	case PullIfNotPresent, PullAlways, PullNever:
		return p, nil
	}
	return "", switchboard.Errorf(switchboard.ErrInvalid, "pull policy %q: want if-not-present, always or never", s)
}

// ImageRules are the gateway's rules for the images it runs.
type ImageRules struct {
	// Allow lists the registries and repositories images may come from;
	// empty allows every image. Each entry is a registry ("ghcr.io/"), a
	// repository prefix ending in "/*" or "/" ("docker.io/mcp/*"), or a
	// repository ("127.0.0.1:5000/tools/notes"), with Docker's defaults
	// ("mcp/fetch" is docker.io/mcp/fetch, "alpine" docker.io/library/alpine).
	Allow []string
	// RequireDigest refuses an image named without a digest
	// (name@sha256:...), so what runs cannot change under its name.
	RequireDigest bool
	// Timeout bounds one pull (0: 10 minutes); StallTimeout ends a pull
	// that reports no progress for that long (0: 60 seconds).
	Timeout, StallTimeout time.Duration
}

// RegistryAuth is the credentials of one pull, resolved from a project's
// secrets. They are sent to the engine only, never logged or reported.
type RegistryAuth struct {
	Username string
	Password string
}

// PullOptions configure one EnsureImage.
type PullOptions struct {
	Policy PullPolicy
	// Auth, when set, is sent with the pull.
	Auth *RegistryAuth
	// Owner names who asks (a project; "" is the gateway itself). An
	// image pulled with credentials is private: an owner uses it once the
	// registry accepts that owner's own credentials (or none) for it (see
	// access.go).
	Owner string
	// Progress, when set, receives the pull's progress as it changes.
	Progress func(PullProgress)
}

// PullProgress is where one pull stands.
type PullProgress = switchboard.PullProgress

// pulls is the engine's image state: pulls under way, shared by every
// caller of the same image and credentials, and which owners proved their
// access to which private images lately.
type pulls struct {
	mu      sync.Mutex
	rules   ImageRules
	flights map[string]*flight
	granted map[string]time.Time // owner NUL image id -> when its access to a private image was proven
	started atomic.Int64         // pulls begun, for tests
}

type flight struct {
	repo     string          // the image's repository (docker.io/library/alpine)
	private  bool            // pulled with credentials
	owners   map[string]bool // who waits for it ("": the gateway itself)
	done     chan struct{}
	err      error
	id       string // the image pulled, when err is nil
	mu       sync.Mutex
	progress PullProgress
	watchers []func(PullProgress)
}

// SetImageRules sets the rules EnsureImage and CheckImage apply.
func (e *Engine) SetImageRules(r ImageRules) {
	if r.Timeout <= 0 {
		r.Timeout = 10 * time.Minute
	}
	if r.StallTimeout <= 0 {
		r.StallTimeout = time.Minute
	}
	e.pulls.mu.Lock()
	e.pulls.rules = r
	e.pulls.mu.Unlock()
}

func (e *Engine) imageRules() ImageRules {
	e.pulls.mu.Lock()
	defer e.pulls.mu.Unlock()
	r := e.pulls.rules
	if r.Timeout <= 0 {
		r.Timeout = 10 * time.Minute
	}
	if r.StallTimeout <= 0 {
		r.StallTimeout = time.Minute
	}
	return r
}

// CheckImage applies the image rules to ref: ErrInvalid names the rule an
// image breaks (or what is wrong with the reference).
func (e *Engine) CheckImage(ref string) error {
	return checkImage(e.imageRules(), ref)
}

func checkImage(r ImageRules, ref string) error {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return switchboard.Errorf(switchboard.ErrInvalid, "image %q is not a valid image reference (%v); write it as [registry/]name[:tag][@sha256:digest]", ref, err)
	}
	if _, ok := named.(reference.Digested); r.RequireDigest && !ok {
		return switchboard.Errorf(switchboard.ErrInvalid, "image %q has no digest and MCP_SERVER_IMAGE_REQUIRE_DIGEST is on: name it as %s@sha256:<digest>", ref, reference.TrimNamed(named))
	}
	if len(r.Allow) == 0 {
		return nil
	}
	name := named.Name() // docker.io/library/alpine
	for _, a := range r.Allow {
		if allowed(a, name) {
			return nil
		}
	}
	return switchboard.Errorf(switchboard.ErrInvalid, "image %q (%s) is outside MCP_SERVER_IMAGE_ALLOW (%s): use an image from an allowed registry or repository, or add it there", ref, name, strings.Join(r.Allow, ","))
}

// allowed matches one allow-list entry against a normalized repository
// name.
func allowed(entry, name string) bool {
	entry = strings.TrimSpace(entry)
	if entry == "" {
		return false
	}
	if p, ok := strings.CutSuffix(entry, "*"); ok {
		return strings.HasPrefix(name, normalizePrefix(p))
	}
	if strings.HasSuffix(entry, "/") {
		return strings.HasPrefix(name, normalizePrefix(entry))
	}
	n, err := reference.ParseNormalizedNamed(entry)
	if err != nil {
		return false
	}
	return n.Name() == name
}

// normalizePrefix gives a prefix Docker's defaults: "mcp/" is
// "docker.io/mcp/"; a first part with a dot, a colon or "localhost" is a
// registry.
func normalizePrefix(p string) string {
	first, _, _ := strings.Cut(p, "/")
	if strings.ContainsAny(first, ".:") || first == "localhost" {
		return p
	}
	return "docker.io/" + p
}

// EnsureImage makes ref present on the engine as opts.Policy says,
// pulling it when needed; concurrent calls for the same image and
// credentials share one pull, and a caller that gives up (its ctx) leaves
// the pull to the others. Errors name the image and the cause: ErrInvalid
// (the image rules, a bad reference), ErrNotFound (no such image, or not
// present under PullNever), ErrForbidden (the registry refused the
// credentials, or an image another owner pulled privately), ErrTimeout
// (the pull stalled or ran out of time), ErrUnavailable (registry or
// engine unreachable), ErrResourceLimit (the engine's disk is full).
func (e *Engine) EnsureImage(ctx context.Context, ref string, opts PullOptions) error {
	rules := e.imageRules()
	if err := checkImage(rules, ref); err != nil {
		return err
	}
	if opts.Policy == "" {
		opts.Policy = PullIfNotPresent
	}
	if opts.Policy != PullAlways {
		img, ok, err := e.inspectImage(ctx, ref)
		if err != nil {
			return err
		}
		switch {
		case ok:
			return e.mayUse(ctx, ref, img, opts, rules)
		case opts.Policy == PullNever:
			return switchboard.Errorf(switchboard.ErrNotFound, "image %s is not on the Docker engine and its pull policy is never: load it on the engine (docker pull or docker load) or allow pulls", ref)
		}
	}
	return e.pull(ctx, ref, opts, rules)
}

func encodeAuth(a *RegistryAuth) (string, error) {
	if a == nil {
		return "", nil
	}
	s, err := authconfig.Encode(registry.AuthConfig{Username: a.Username, Password: a.Password})
	if err != nil {
		return "", switchboard.Errorf(switchboard.ErrInternal, "encoding registry credentials failed")
	}
	return s, nil
}

// flightKey names a pull: the image and a hash of its credentials, so
// different credentials never share a pull.
func flightKey(ref string, a *RegistryAuth) string {
	if a == nil {
		return ref
	}
	h := sha256.Sum256([]byte(a.Username + "\x00" + a.Password))
	return ref + "\x00" + hex.EncodeToString(h[:8])
}

func (e *Engine) pull(ctx context.Context, ref string, opts PullOptions, rules ImageRules) error {
	key := flightKey(ref, opts.Auth)
	e.pulls.mu.Lock()
	if e.pulls.flights == nil {
		e.pulls.flights = map[string]*flight{}
	}
	f, joined := e.pulls.flights[key]
	if !joined {
		named, _ := reference.ParseNormalizedNamed(ref) // checkImage parsed it
		f = &flight{repo: named.Name(), private: opts.Auth != nil, owners: map[string]bool{}, done: make(chan struct{}),
			progress: PullProgress{Image: ref, Status: "starting", StartedAt: time.Now().UTC()}}
		e.pulls.flights[key] = f
	}
	f.owners[opts.Owner] = true
	if opts.Progress != nil {
		f.mu.Lock()
		f.watchers = append(f.watchers, opts.Progress)
		p := f.progress
		f.mu.Unlock()
		opts.Progress(p)
	}
	e.pulls.mu.Unlock()
	if !joined {
		e.pulls.started.Add(1)
		go func() {
			f.id, f.err = e.runPull(ref, opts.Auth, rules, f)
			if f.err == nil && f.private {
				if err := e.markPrivate(context.Background(), ref, f.repo); err != nil {
					// Unmarked, it would be anyone's: it goes.
					_ = e.RemoveImage(context.Background(), ref)
					f.err = switchboard.Errorf(switchboard.KindOf(err), "pulling image %s: marking it private failed: %s", ref, switchboard.Message(err))
				}
			}
			e.pulls.mu.Lock()
			delete(e.pulls.flights, key)
			e.pulls.mu.Unlock()
			close(f.done)
		}()
	}
	select {
	case <-f.done:
		if f.err == nil && opts.Owner != "" {
			// The registry took this owner's credentials (or none).
			e.grant(opts.Owner, f.id)
		}
		return f.err
	case <-ctx.Done():
		return switchboard.Errorf(switchboard.ErrCanceled, "waiting for the pull of %s: %v (the pull goes on)", ref, context.Cause(ctx))
	}
}

var errStalled = errors.New("stalled")

// runPull pulls ref on the engine, under the rules' time bounds, and
// reports progress to f's watchers; it returns the image's id.
func (e *Engine) runPull(ref string, auth *RegistryAuth, rules ImageRules, f *flight) (string, error) {
	enc, err := encodeAuth(auth)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ctx, stop := context.WithTimeout(ctx, rules.Timeout)
	defer stop()
	stall := time.AfterFunc(rules.StallTimeout, func() { cancel(errStalled) })
	defer stall.Stop()
	e.log.Info("engine: pulling image", "image", ref)
	start := time.Now()
	fail := func(err error) error {
		if context.Cause(ctx) == errStalled {
			return switchboard.Errorf(switchboard.ErrTimeout, "pulling image %s: no progress for %s (is the registry answering?)", ref, rules.StallTimeout)
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return switchboard.Errorf(switchboard.ErrTimeout, "pulling image %s: not done within %s", ref, rules.Timeout)
		}
		return pullError(ref, err)
	}
	resp, err := e.cli.ImagePull(ctx, ref, client.ImagePullOptions{RegistryAuth: enc})
	if err != nil {
		return "", fail(err)
	}
	defer resp.Close()
	layers := map[string]*layer{}
	var order []string
	for m, err := range resp.JSONMessages(ctx) {
		if err != nil {
			return "", fail(err)
		}
		if m.Error != nil {
			return "", fail(errors.New(m.Error.Message))
		}
		stall.Reset(rules.StallTimeout)
		if m.ID != "" && m.Status != "" && !strings.HasPrefix(m.Status, "Pulling from") && !strings.HasPrefix(m.Status, "Digest:") {
			l := layers[m.ID]
			if l == nil {
				l = &layer{}
				layers[m.ID] = l
				order = append(order, m.ID)
			}
			switch {
			case m.Status == "Pull complete" || m.Status == "Already exists":
				l.done = true
				if l.total > 0 {
					l.current = l.total
				}
			case m.Status == "Downloading" && m.Progress != nil:
				l.current, l.total = m.Progress.Current, max(l.total, m.Progress.Total)
			case m.Status == "Download complete" && l.total > 0:
				l.current = l.total
			}
		}
		p := PullProgress{Image: ref, Status: m.Status, Layers: len(order)}
		for _, id := range order {
			l := layers[id]
			p.Bytes += l.current
			p.TotalBytes += l.total
			if l.done {
				p.LayersDone++
			}
		}
		f.report(p)
	}
	if err := ctx.Err(); err != nil {
		return "", fail(err)
	}
	img, ok, err := e.inspectImage(context.Background(), ref)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", switchboard.Errorf(switchboard.ErrInternal, "pulling image %s: the engine reported success but has no such image", ref)
	}
	e.log.Info("engine: pulled image", "image", ref, "took", time.Since(start).Round(time.Millisecond))
	return img.ID, nil
}

type layer struct {
	current, total int64
	done           bool
}

func (f *flight) report(p PullProgress) {
	f.mu.Lock()
	p.StartedAt = f.progress.StartedAt
	f.progress = p
	ws := slices.Clone(f.watchers)
	f.mu.Unlock()
	for _, w := range ws {
		w(p)
	}
}

// Pulls lists the pulls under way that owner (a project) waits for, and
// the gateway's own (the sandbox's), by image: another project's are not
// its business.
func (e *Engine) Pulls(owner string) []PullProgress {
	e.pulls.mu.Lock()
	var fs []*flight
	for _, f := range e.pulls.flights {
		if f.owners[owner] || f.owners[""] {
			fs = append(fs, f)
		}
	}
	e.pulls.mu.Unlock()
	out := make([]PullProgress, 0, len(fs))
	for _, f := range fs {
		f.mu.Lock()
		out = append(out, f.progress)
		f.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b PullProgress) int { return strings.Compare(a.Image, b.Image) })
	return out
}

// pullError classifies a failed pull: what the user can do about it,
// naming the image; never the credentials.
func pullError(ref string, err error) error { return imageError("pulling", ref, err) }

// imageError classifies a failed pull or push (verb).
func imageError(verb, ref string, err error) error {
	cause := pullCause(err)
	msg := strings.ToLower(err.Error())
	switch {
	case cerrdefs.IsUnauthorized(err) || cerrdefs.IsPermissionDenied(err) || strings.Contains(msg, "unauthorized") || strings.Contains(msg, "denied") || strings.Contains(msg, "authentication required") || strings.Contains(msg, "no basic auth credentials"):
		return switchboard.Errorf(switchboard.ErrForbidden, "%s image %s: the registry refused access (%s): check the registry credentials", verb, ref, cause)
	case cerrdefs.IsNotFound(err) || strings.Contains(msg, "manifest unknown") || strings.Contains(msg, "not found"):
		return switchboard.Errorf(switchboard.ErrNotFound, "%s image %s: no such image in its registry (%s)", verb, ref, cause)
	case strings.Contains(msg, "no space left"):
		return switchboard.Errorf(switchboard.ErrResourceLimit, "%s image %s: the Docker engine's disk is full (%s): free space on it", verb, ref, cause)
	case strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") || strings.Contains(msg, "timeout") || strings.Contains(msg, "i/o timeout") || strings.Contains(msg, "dial tcp"):
		return switchboard.Errorf(switchboard.ErrUnavailable, "%s image %s: its registry cannot be reached (%s)", verb, ref, cause)
	}
	return switchboard.Errorf(switchboard.ErrUnavailable, "%s image %s failed: %s", verb, ref, cause)
}

// pullCause is an engine error's message, shortened, for the user.
func pullCause(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "Error response from daemon: ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// PushImage pushes ref (already tagged for its registry) with auth, for
// publishing an image built here (the sandbox's) to a registry.
func (e *Engine) PushImage(ctx context.Context, ref string, auth *RegistryAuth) error {
	if auth == nil {
		auth = &RegistryAuth{} // the engine wants the header, empty or not
	}
	enc, err := encodeAuth(auth)
	if err != nil {
		return err
	}
	resp, err := e.cli.ImagePush(ctx, ref, client.ImagePushOptions{RegistryAuth: enc})
	if err != nil {
		return imageError("pushing", ref, err)
	}
	defer resp.Close()
	for m, err := range resp.JSONMessages(ctx) {
		if err != nil {
			return imageError("pushing", ref, err)
		}
		if m.Error != nil {
			return imageError("pushing", ref, errors.New(m.Error.Message))
		}
	}
	return nil
}

// ImageDigest returns ref's repository digest (name@sha256:...) as its
// registry knows it, "" when it has none (an image never pushed or
// pulled).
func (e *Engine) ImageDigest(ctx context.Context, ref string) (string, error) {
	res, err := e.cli.ImageInspect(ctx, ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return "", switchboard.Errorf(switchboard.ErrNotFound, "image %s is not on the Docker engine", ref)
		}
		return "", e.wrap(err, "inspect image "+ref)
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", switchboard.Errorf(switchboard.ErrInvalid, "image %q is not a valid image reference", ref)
	}
	for _, d := range res.RepoDigests {
		if n, err := reference.ParseNormalizedNamed(d); err == nil && n.Name() == named.Name() {
			return d, nil
		}
	}
	return "", nil
}

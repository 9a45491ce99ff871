package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"

	"github.com/switchboard-mcp/switchboard"
)

// Which owner (project) may use an image pulled with registry credentials.
//
// The record lives with the image on the engine, not in this process: a
// pull with credentials that brings an image the engine did not have
// gives it one more name, privateTag(id). So the mark holds after a
// restart, for every gateway sharing the engine, and under every name the
// image is asked for by (a tag, a digest, another registry's name, its
// id). Before an owner uses a marked image, the registry must accept that
// owner's own credentials (or none) for the image's digest; the verdict
// is kept per (owner, image id) for accessTTL. An image that was on the
// engine under another name before the pull (built or loaded here, pulled
// from elsewhere) is not marked: anyone could name it already.

// PrivateRepo is the repository of the marks of privately pulled images
// (`docker images switchboard-private`). Removing a mark makes its image
// usable by every project.
const PrivateRepo = "switchboard-private"

// accessTTL is how long an owner's proven access to a private image is
// trusted before the registry is asked again (a revoked credential is
// noticed within it).
const accessTTL = 5 * time.Minute

// privateTag is the mark of private image id.
func privateTag(id string) string { return PrivateRepo + ":" + strings.TrimPrefix(id, "sha256:") }

func isPrivate(img image.InspectResponse) bool {
	return slices.Contains(img.RepoTags, privateTag(img.ID))
}

// inspectImage returns ref's image; found is false when the engine has
// none.
func (e *Engine) inspectImage(ctx context.Context, ref string) (img image.InspectResponse, found bool, err error) {
	res, err := e.cli.ImageInspect(ctx, ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return img, false, nil
		}
		return img, false, e.wrap(err, "inspect image "+ref)
	}
	return res.InspectResponse, true, nil
}

// markPrivate marks the image ref names, just pulled from repo with
// credentials, unless it has a name from elsewhere.
func (e *Engine) markPrivate(ctx context.Context, ref, repo string) error {
	img, found, err := e.inspectImage(ctx, ref)
	if err != nil || !found || isPrivate(img) {
		return err
	}
	for _, n := range slices.Concat(img.RepoTags, img.RepoDigests) {
		if named, err := reference.ParseNormalizedNamed(n); err != nil || named.Name() != repo {
			return nil
		}
	}
	return e.TagImage(ctx, img.ID, privateTag(img.ID))
}

func (e *Engine) grant(owner, id string) {
	e.pulls.mu.Lock()
	defer e.pulls.mu.Unlock()
	if e.pulls.granted == nil {
		e.pulls.granted = map[string]time.Time{}
	}
	e.pulls.granted[owner+"\x00"+id] = time.Now()
}

// mayUse lets opts.Owner use img, present on the engine as ref: any
// image when Owner is "" (the gateway's own, as the sandbox's); an
// unmarked one, unless a pull with credentials of its repository is under
// way (its mark may be about to come); a private one when the registry
// accepts the owner's credentials (or none) for it.
func (e *Engine) mayUse(ctx context.Context, ref string, img image.InspectResponse, opts PullOptions, rules ImageRules) error {
	if opts.Owner == "" {
		return nil
	}
	if !isPrivate(img) && !e.privatePullOf(img.RepoDigests) {
		return nil
	}
	key := opts.Owner + "\x00" + img.ID
	e.pulls.mu.Lock()
	at, seen := e.pulls.granted[key]
	e.pulls.mu.Unlock()
	if seen && time.Since(at) < accessTTL {
		return nil
	}
	err := e.canPull(ctx, ref, img.RepoDigests, opts.Auth, rules.StallTimeout)
	switch {
	case err == nil:
		e.grant(opts.Owner, img.ID)
	case seen && errors.Is(err, switchboard.ErrUnavailable):
		// Proven before, by this process: a registry that is down does
		// not stop a project's own server.
		e.log.Warn("engine: registry unreachable; using the project's earlier proven access to a private image", "image", ref, "owner", opts.Owner)
		return nil
	}
	return err
}

// privatePullOf reports whether a pull with credentials is under way of
// a repository one of digests names.
func (e *Engine) privatePullOf(digests []string) bool {
	e.pulls.mu.Lock()
	defer e.pulls.mu.Unlock()
	for _, f := range e.pulls.flights {
		for _, d := range digests {
			if n, err := reference.ParseNormalizedNamed(d); err == nil && f.private && n.Name() == f.repo {
				return true
			}
		}
	}
	return false
}

// canPull asks the registries of digests whether auth (sent only to the
// registry ref names; none to the others) may pull one of them, within
// bound. ErrForbidden when they refuse, ErrUnavailable when none answers.
func (e *Engine) canPull(ctx context.Context, ref string, digests []string, auth *RegistryAuth, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return switchboard.Errorf(switchboard.ErrInvalid, "image %q is not a valid image reference", ref)
	}
	refused := switchboard.Errorf(switchboard.ErrForbidden, "image %s was pulled with another project's registry credentials and names no registry to check this project's with: pull it by its registry name with this project's credentials", ref)
	var down error
	answered := false
	for _, d := range digests {
		n, err := reference.ParseNormalizedNamed(d)
		if err != nil {
			continue
		}
		var a *RegistryAuth
		if reference.Domain(n) == reference.Domain(named) {
			a = auth
		}
		enc, err := encodeAuth(a)
		if err != nil {
			return err
		}
		_, err = e.cli.DistributionInspect(ctx, d, client.DistributionInspectOptions{EncodedRegistryAuth: enc})
		if err == nil {
			return nil
		}
		switch k := switchboard.KindOf(pullError(ref, err)); {
		case ctx.Err() != nil || k == switchboard.ErrUnavailable || k == switchboard.ErrTimeout:
			down = switchboard.Errorf(switchboard.ErrUnavailable, "image %s was pulled with another project's registry credentials, and its registry cannot be reached to check this project's (%s); try again when it answers", ref, pullCause(err))
		default:
			answered = true
			refused = switchboard.Errorf(switchboard.ErrForbidden, "image %s was pulled with another project's registry credentials, and its registry refused this project's (%s): set this project's own", ref, pullCause(err))
		}
	}
	if down != nil && !answered {
		return down
	}
	return refused
}

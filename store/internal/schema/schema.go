// Package schema holds the conventions both stores share: enum spellings,
// id generation, the clock they stamp rows with, how embedded migrations
// are named and ordered, and the client-safe
// errors for missing or clashing rows. Keeping them here means
// store/postgres and store/sqlite cannot drift apart in what a caller
// sees; everything driver-specific (SQL, scanning, error codes) stays in
// the stores.
package schema

import (
	"crypto/rand"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// DBTransport returns the stored spelling of t: the kb.mcp_transport
// enum (and the SQLite transport column) spell streamable HTTP with an
// underscore.
func DBTransport(t switchboard.Transport) string {
	if t == switchboard.TransportStreamableHTTP {
		return "streamable_http"
	}
	return string(t)
}

// DomainTransport is the inverse of DBTransport.
func DomainTransport(s string) switchboard.Transport {
	if s == "streamable_http" {
		return switchboard.TransportStreamableHTTP
	}
	return switchboard.Transport(s)
}

// NewID returns a random (version 4) UUID, the form PostgreSQL stores.
func NewID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Now is the stores' clock: UTC, truncated to the microsecond precision
// both databases keep.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// ProjectNotFound is the ErrNotFound for a missing project.
func ProjectNotFound(id string) error {
	return switchboard.Errorf(switchboard.ErrNotFound, "project %q not found", id)
}

// ProjectExists is the ErrConflict for creating a project whose ID is taken.
func ProjectExists(id string) error {
	return switchboard.Errorf(switchboard.ErrConflict, "project %q already exists", id)
}

// ServerNotFound is the ErrNotFound for a server looked up by name.
func ServerNotFound(projectID, name string) error {
	return switchboard.Errorf(switchboard.ErrNotFound, "server %q not found in project %q", name, projectID)
}

// ServerIDNotFound is the ErrNotFound for a server looked up by r.ID.
func ServerIDNotFound(r switchboard.ServerRecord) error {
	return switchboard.Errorf(switchboard.ErrNotFound, "server %q not found in project %q", r.ID, r.ProjectID)
}

// ServerExists is the ErrConflict for a server name already taken in its
// project.
func ServerExists(r switchboard.ServerRecord) error {
	return switchboard.Errorf(switchboard.ErrConflict, "project %q already has a server named %q", r.ProjectID, r.Name)
}

// ServerNotOfProduct is the ErrConflict for a manifest import that would
// take over a server the product does not own.
func ServerNotOfProduct(projectID, productID, name string) error {
	return switchboard.Errorf(switchboard.ErrConflict,
		"manifest of product %q: server %q already exists in project %q and does not belong to the product", productID, name, projectID)
}

// SecretNotFound is the ErrNotFound for a missing secret.
func SecretNotFound(projectID, name string) error {
	return switchboard.Errorf(switchboard.ErrNotFound, "secret %q not found in project %q", name, projectID)
}

// WorkspaceNotFound is the ErrNotFound for a missing workspace.
func WorkspaceNotFound(id string) error {
	return switchboard.Errorf(switchboard.ErrNotFound, "workspace %q not found", id)
}

// TokenNotFound is the ErrNotFound for a token missing from its project.
func TokenNotFound(projectID, id string) error {
	return switchboard.Errorf(switchboard.ErrNotFound, "token %q not found in project %q", id, projectID)
}

// TokenNotFoundOrRevoked is the ErrNotFound for a hash that matches no
// live token; it does not say which, nor echo the hash.
func TokenNotFoundOrRevoked() error {
	return switchboard.Errorf(switchboard.ErrNotFound, "token not found or revoked")
}

// TokenHashExists is the ErrConflict for a token whose hash is taken.
func TokenHashExists(name string) error {
	return switchboard.Errorf(switchboard.ErrConflict, "token %q: a token with this hash already exists", name)
}

// Migration is one embedded schema migration.
type Migration struct {
	Version int
	Name    string // file name without .sql
	SQL     string
}

// ReadMigrations returns the migrations in dir of fsys ordered by version;
// file names are NNNN_name.sql. store names the store in errors.
func ReadMigrations(fsys fs.FS, dir, store string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("%s: migration %s: name must be NNNN_name.sql: %w", store, e.Name(), switchboard.ErrInternal)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(e.Name(), ".sql"), SQL: string(b)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	return out, nil
}

// ValidateBatch checks every record of a tool-call batch, naming the
// first bad one: a batch is stored whole or not at all.
func ValidateBatch(batch []switchboard.ToolCallRecord) error {
	for i, c := range batch {
		if err := c.Validate(); err != nil {
			return switchboard.Errorf(switchboard.ErrInvalid, "record %d of the batch: %s", i, switchboard.Message(err))
		}
	}
	return nil
}

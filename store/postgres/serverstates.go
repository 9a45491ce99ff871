package postgres

import (
	"context"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

// PutServerState implements switchboard.ServerStateStore.
func (s *Store) PutServerState(ctx context.Context, st switchboard.ServerLastState) error {
	if err := st.Validate(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO kb.server_states (project_id, server, state, error, at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (project_id, server) DO UPDATE SET state = excluded.state, error = excluded.error, at = excluded.at`,
		st.ProjectID, st.Server, string(st.State), st.Error, st.At.Truncate(time.Microsecond))
	if isCode(err, foreignKeyViolation) {
		return schema.ProjectNotFound(st.ProjectID)
	}
	if err != nil {
		return fail("put server state", err)
	}
	return nil
}

// ServerStates implements switchboard.ServerStateStore.
func (s *Store) ServerStates(ctx context.Context, project string) ([]switchboard.ServerLastState, error) {
	rows, err := s.pool.Query(ctx, "SELECT server, state, error, at FROM kb.server_states WHERE project_id = $1 ORDER BY server", project)
	if err != nil {
		return nil, fail("list server states", err)
	}
	defer rows.Close()
	out := []switchboard.ServerLastState{}
	for rows.Next() {
		st := switchboard.ServerLastState{ProjectID: project}
		var state string
		if err := rows.Scan(&st.Server, &state, &st.Error, &st.At); err != nil {
			return nil, fail("list server states", err)
		}
		st.State, st.At = switchboard.ServerState(state), st.At.UTC()
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("list server states", err)
	}
	return out, nil
}

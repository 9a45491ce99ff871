// Package sandbox runs code for agents in isolated containers.
package sandbox

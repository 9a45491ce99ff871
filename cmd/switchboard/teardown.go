package main

import "github.com/switchboard-mcp/switchboard/engine"

// projectHolders are the services that run a project's containers, in the
// order a project's deletion ends them.
func projectHolders(sbox *sandboxRuntime, hr *hostedRuntime, cat *catalogRuntime) []engine.ProjectHolder {
	hs := []engine.ProjectHolder{sbox.svc, hr.svc}
	if cat.od != nil {
		hs = append(hs, cat.od)
	}
	return hs
}

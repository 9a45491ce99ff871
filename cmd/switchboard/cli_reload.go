package main

import (
	"fmt"
	"net/http"
)

func (c *cli) reload(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	var res struct {
		Servers int `json:"servers"`
	}
	raw, err := c.api(http.MethodPost, "/reload", struct{}{}, &res)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	fmt.Fprintf(c.stdout, "reloaded the servers file: %d servers\n", res.Servers)
	return nil
}

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/baton-engine/baton"
)

func versionString() string {
	return fmt.Sprintf("baton %s\napi versions: %s", baton.Version, strings.Join(baton.APIVersions, ", "))
}

func (c *cli) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the API versions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(c.stdout, versionString())
			return nil
		},
	}
}

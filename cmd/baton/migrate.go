package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/baton-engine/baton/store"
)

func (c *cli) migrateCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply database migrations and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadServeConfig(c.getenv, &f)
			if err != nil {
				return usageErr(fmt.Errorf("configuration error: %w", err))
			}
			if cfg.Check {
				fmt.Fprintln(c.stdout, "configuration ok")
				return nil
			}
			db, err := store.Open(cmd.Context(), store.Options{URL: cfg.storeURL()})
			if err != nil {
				return runtimeErr(fmt.Errorf("open store: %w", err))
			}
			defer db.Close()
			where := cfg.DBPath
			if cfg.DatabaseURL != "" {
				where = "the PostgreSQL database"
			}
			fmt.Fprintf(c.stdout, "migrations up to date at %s\n", where)
			return nil
		},
	}
	f.register(cmd.Flags())
	return cmd
}

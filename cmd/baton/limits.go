package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/baton-engine/baton/httpapi"
)

// limitConfig is the client port's protection: the per-credential rate
// limit, the minimum Client-Version, and idempotency receipt retention.
type limitConfig struct {
	RateLimit        float64          // BATON_RATE_LIMIT requests/s per credential; 0 = off
	RateBurst        int              // BATON_RATE_BURST; 0 = ceil(RateLimit)
	MinClientVersion *httpapi.Version // BATON_MIN_CLIENT_VERSION; nil = no check
	SweepInterval    time.Duration    // BATON_IDEMPOTENCY_SWEEP_INTERVAL
	Retention        time.Duration    // BATON_IDEMPOTENCY_RETENTION, at least 7 days
}

// loadLimits reads the limit settings from the environment.
func loadLimits(getenv func(string) string) (limitConfig, error) {
	c := limitConfig{SweepInterval: httpapi.DefaultSweepInterval, Retention: httpapi.MinRetention}
	var errs []error
	if v := strings.TrimSpace(getenv("BATON_RATE_LIMIT")); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
			errs = append(errs, fmt.Errorf("BATON_RATE_LIMIT: %q is not a non-negative number of requests per second", v))
		}
		c.RateLimit = n
	}
	if v := strings.TrimSpace(getenv("BATON_RATE_BURST")); v != "" {
		n, err := strconv.ParseUint(v, 10, 31)
		if err != nil {
			errs = append(errs, fmt.Errorf("BATON_RATE_BURST: %q is not a non-negative whole number", v))
		}
		c.RateBurst = int(n)
	}
	if v := strings.TrimSpace(getenv("BATON_MIN_CLIENT_VERSION")); v != "" {
		ver, err := httpapi.ParseVersion(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("BATON_MIN_CLIENT_VERSION: %w", err))
		} else {
			c.MinClientVersion = &ver
		}
	}
	errs = append(errs,
		envDuration(getenv, "BATON_IDEMPOTENCY_SWEEP_INTERVAL", &c.SweepInterval),
		envDuration(getenv, "BATON_IDEMPOTENCY_RETENTION", &c.Retention))
	if c.Retention < httpapi.MinRetention {
		errs = append(errs, fmt.Errorf("BATON_IDEMPOTENCY_RETENTION: %s is below the minimum of %s (7 days)", c.Retention, httpapi.MinRetention))
	}
	return c, errors.Join(errs...)
}

// envDuration sets *dst from the environment variable name when it is set:
// a positive Go duration (1h, 30m) or a whole number of seconds.
func envDuration(getenv func(string) string, name string, dst *time.Duration) error {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.ParseUint(v, 10, 32) // whole seconds, as elsewhere
		d, err = time.Duration(n)*time.Second, nerr
	}
	if err != nil || d <= 0 {
		return fmt.Errorf("%s: %q is not a positive duration (e.g. 1h, 30m, or seconds)", name, v)
	}
	*dst = d
	return nil
}

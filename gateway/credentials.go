package gateway

import (
	"context"
	"fmt"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/auth"
)

// Issuer signs turn tokens (auth.TurnTokens); it refuses turns that are
// not active with auth.ErrTurnInactive.
type Issuer interface {
	IssueModel(ctx context.Context, sessionID, turnID, machineID string) (string, *auth.TurnGrant, error)
	IssueTools(ctx context.Context, sessionID, turnID, machineID string, epoch int64) (string, *auth.TurnGrant, error)
}

// ToolOffers says whether a session offers a brain server-side tools (the
// engine's OffersTools).
type ToolOffers interface {
	OffersTools(ctx context.Context, sessionID string) (bool, error)
}

// CredentialOptions configure Credentials.
type CredentialOptions struct {
	Issuer Issuer
	// Origin returns the client origin executors reach this server at
	// (see Origin).
	Origin func() string
	// Tools decides whether a turn gets a tools credential; nil means
	// never.
	Tools ToolOffers
}

// Credentials issues brain turns' credentials (baton.TurnCredentials):
// model_base_url <origin>/v1/model with a model token, and — when the
// session offers server-side tools — tools_mcp_url
// <origin>/v1/sessions/{id}/mcp with a tools token bound to the epoch.
// Both tokens expire together (one hour). The executor hub uses the same
// Issue for model_token.refresh and tools_token.refresh.
type Credentials struct {
	opts CredentialOptions
}

var _ baton.TurnCredentials = (*Credentials)(nil)

// NewCredentials returns a Credentials.
func NewCredentials(opts CredentialOptions) *Credentials { return &Credentials{opts: opts} }

// Issue implements baton.TurnCredentials. A turn that is not active is
// auth.ErrTurnInactive (ECodeForbidden).
func (c *Credentials) Issue(ctx context.Context, sessionID, turnID, machineID string, epoch int64) (baton.TurnMetadata, error) {
	var md baton.TurnMetadata
	origin := c.opts.Origin()
	if origin == "" {
		return md, baton.Errorf(baton.ECodeUnavailable, "the server does not know its client URL yet")
	}
	token, grant, err := c.opts.Issuer.IssueModel(ctx, sessionID, turnID, machineID)
	if err != nil {
		return md, fmt.Errorf("model token: %w", err)
	}
	md.ModelBaseURL, md.ModelToken, md.ModelTokenExpiresAt = origin+ModelBasePath, token, grant.ExpiresAt
	if c.opts.Tools == nil {
		return md, nil
	}
	offers, err := c.opts.Tools.OffersTools(ctx, sessionID)
	if err != nil || !offers {
		return md, err
	}
	tools, _, err := c.opts.Issuer.IssueTools(ctx, sessionID, turnID, machineID, epoch)
	if err != nil {
		return md, fmt.Errorf("tools token: %w", err)
	}
	md.ToolsMCPURL, md.ToolsMCPToken = origin+"/v1/sessions/"+sessionID+"/mcp", tools
	return md, nil
}

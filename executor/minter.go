package executor

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/baton-engine/baton/executor/proto"
	"github.com/baton-engine/baton/filearea"
)

// View names one view of a session's files.
type View struct {
	Name string // the {view} of the service URL, e.g. "workspace"
	// Path is where the view goes within an executor session's directory,
	// e.g. "/workspace"; fs.mount sends it below that directory, as
	// proto.SessionViewPath: "/sessions/<executor session id>/workspace".
	Path     string
	Root     string // the cleaned directory it shows; "" for the whole area
	Readonly bool
}

// Workspace returns the default view: the whole file area, writable, at
// /workspace of each executor session's directory.
func Workspace() View { return View{Name: "workspace", Path: "/workspace"} }

// Mounter is the part of a binding (*Binding) that Minter.Mount uses.
type Mounter interface {
	SessionID() string
	Epoch() int64
	Mount(ctx context.Context, views []proto.FsView) ([]string, error)
}

// Minter builds the views of a session binding: the service URL of each
// and a token for the binding's epoch. It implements FileViews.
type Minter struct {
	// Origin is the client port's public origin, e.g.
	// "https://baton.example"; service URLs are
	// Origin + "/v1/fs/{session_id}/{view}".
	Origin string
	Tokens filearea.ViewTokens
	// Views are minted for every session; nil means just Workspace().
	Views []View
}

var _ FileViews = (*Minter)(nil)

// For returns the views of session sessionID for binding epoch epoch,
// each with a fresh token, at their paths as Views name them (the hub
// moves them below the executor session's directory).
func (m *Minter) For(sessionID string, epoch int64) ([]proto.FsView, error) {
	views := m.Views
	if views == nil {
		views = []View{Workspace()}
	}
	origin := strings.TrimRight(m.Origin, "/")
	out := make([]proto.FsView, 0, len(views))
	for _, v := range views {
		tok, err := m.Tokens.Issue(filearea.ViewGrant{SessionID: sessionID, View: v.Name, Root: v.Root, Epoch: epoch, Readonly: v.Readonly})
		if err != nil {
			return nil, fmt.Errorf("mint view %s: %w", v.Name, err)
		}
		out = append(out, proto.FsView{
			View:       v.Name,
			Path:       v.Path,
			ServiceURL: origin + "/v1/fs/" + url.PathEscape(sessionID) + "/" + url.PathEscape(v.Name),
			Token:      tok,
			Readonly:   v.Readonly,
		})
	}
	return out, nil
}

// Mount sends fs.mount on b with views of b's session's files minted for
// b's current epoch and returns the views the executor mounted. Sending it
// again (after a resume, or before the tokens expire) renews the tokens
// without remounting. Call it after a session is bound to a machine
// executor that declared capabilities.fs, and again from Hooks.OnResume,
// since a resume moves the binding to a new epoch; the hub does this
// itself, with a Minter as its Options.Files, for remote sandboxes and
// brains.
func (m *Minter) Mount(ctx context.Context, b Mounter) ([]string, error) {
	return m.MountArea(ctx, b, b.SessionID())
}

// MountArea is Mount for a binding whose executor session is not the
// Baton session owning the files, such as a remote sandbox (sbx_…) of
// session area: the views show area's files, and fs.mount names b's
// session, below whose directory they are mounted
// (proto.SessionViewPath).
func (m *Minter) MountArea(ctx context.Context, b Mounter, area string) ([]string, error) {
	views, err := m.For(area, b.Epoch())
	if err != nil {
		return nil, err
	}
	return b.Mount(ctx, proto.SessionViews(b.SessionID(), views))
}

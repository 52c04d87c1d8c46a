package proto

import (
	"net/url"
	"path"
)

// SessionsDir is where the views of fs.mount live on an executor: each
// executor session gets a directory of its own below it,
// SessionsDir/<session_id>, so one executor can hold the files of many
// sessions at once.
const SessionsDir = "/sessions"

// SessionViewPath is the fs.mount path of a view for executor session
// sessionID: the view's own path (e.g. "/workspace") below the session's
// directory, as in "/sessions/sbx_1/workspace".
func SessionViewPath(sessionID, viewPath string) string {
	return path.Join(SessionsDir, url.PathEscape(sessionID), path.Clean("/"+viewPath))
}

// SessionViews returns views with each path moved below executor session
// sessionID's directory (SessionViewPath); views is not changed.
func SessionViews(sessionID string, views []FsView) []FsView {
	out := make([]FsView, len(views))
	for i, v := range views {
		v.Path = SessionViewPath(sessionID, v.Path)
		out[i] = v
	}
	return out
}

package adminapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

// Executor administration (bma.executor.v1.1): environments and machines,
// and the credentials executors exchange for tokens. Environments and
// machines have the same shape and the same routes, so one set of
// handlers serves both, parameterised by an owner.

// ownerView is an environment or a machine on the wire.
type ownerView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
}

// credentialCreated is the 201 body of POST …/credentials, the only place
// the secret is ever shown.
type credentialCreated struct {
	ID        string `json:"id"`
	Secret    string `json:"secret"`
	Prefix    string `json:"prefix"`
	Scope     string `json:"scope"`
	OwnerID   string `json:"owner_id"`
	CreatedAt string `json:"created_at"`
}

// credentialView is a credential as GET …/credentials lists it (revoked
// ones included, with revoked_at set), never its hash.
type credentialView struct {
	ID        string  `json:"id"`
	Prefix    string  `json:"prefix"`
	Scope     string  `json:"scope"`
	OwnerID   string  `json:"owner_id"`
	CreatedAt string  `json:"created_at"`
	RevokedAt *string `json:"revoked_at"`
}

// owner is one kind of credential owner: its route segment, scope and
// store methods, all rendered as ownerView.
type owner struct {
	path   string // "environments" or "machines"
	scope  string
	create func(ctx context.Context, name string) (ownerView, error)
	get    func(ctx context.Context, id string) (ownerView, error)
	list   func(ctx context.Context, page baton.Page) ([]ownerView, string, error)
	del    func(ctx context.Context, id string) ([]string, error)
}

func newOwnerView(id, name string, created time.Time) ownerView {
	return ownerView{ID: id, Name: name, CreatedAt: baton.FormatTime(created)}
}

func (s *Server) owners() []owner {
	st := s.opts.Executors
	return []owner{
		{
			path: "environments", scope: baton.ExecutorScopeEnvironment,
			create: func(ctx context.Context, name string) (ownerView, error) {
				e := &baton.Environment{Name: name}
				err := st.CreateEnvironment(ctx, e)
				return newOwnerView(e.ID, e.Name, e.CreatedAt), err
			},
			get: func(ctx context.Context, id string) (ownerView, error) {
				e, err := st.Environment(ctx, id)
				if err != nil {
					return ownerView{}, err
				}
				return newOwnerView(e.ID, e.Name, e.CreatedAt), nil
			},
			list: func(ctx context.Context, page baton.Page) ([]ownerView, string, error) {
				items, next, err := st.ListEnvironments(ctx, page)
				views := make([]ownerView, len(items))
				for i, e := range items {
					views[i] = newOwnerView(e.ID, e.Name, e.CreatedAt)
				}
				return views, next, err
			},
			del: st.DeleteEnvironment,
		},
		{
			path: "machines", scope: baton.ExecutorScopeMachine,
			create: func(ctx context.Context, name string) (ownerView, error) {
				m := &baton.Machine{Name: name}
				err := st.CreateMachine(ctx, m)
				return newOwnerView(m.ID, m.Name, m.CreatedAt), err
			},
			get: func(ctx context.Context, id string) (ownerView, error) {
				m, err := st.Machine(ctx, id)
				if err != nil {
					return ownerView{}, err
				}
				return newOwnerView(m.ID, m.Name, m.CreatedAt), nil
			},
			list: func(ctx context.Context, page baton.Page) ([]ownerView, string, error) {
				items, next, err := st.ListMachines(ctx, page)
				views := make([]ownerView, len(items))
				for i, m := range items {
					views[i] = newOwnerView(m.ID, m.Name, m.CreatedAt)
				}
				return views, next, err
			},
			del: st.DeleteMachine,
		},
	}
}

// executorRoutes registers the environment, machine and credential
// routes; without an executor store there are none.
func (s *Server) executorRoutes(mux *http.ServeMux) {
	if s.opts.Executors == nil {
		return
	}
	for _, o := range s.owners() {
		base := "/admin/v1/" + o.path
		s.handle(mux, "POST "+base, o.createHandler(s))
		s.handle(mux, "GET "+base, o.listHandler)
		s.handle(mux, "GET "+base+"/{id}", o.getHandler)
		s.handle(mux, "DELETE "+base+"/{id}", o.deleteHandler(s))
		s.handle(mux, "POST "+base+"/{id}/credentials", o.createCredential(s))
		s.handle(mux, "GET "+base+"/{id}/credentials", o.listCredentials(s))
		s.handle(mux, "DELETE "+base+"/{id}/credentials/{cred_id}", o.revokeCredential(s))
	}
}

// createHandler is POST /admin/v1/{environments|machines} {name}: name
// must be a string (422 rejection), then non-blank (400); a name taken by
// an active one is 409 duplicate_name.
func (o owner) createHandler(s *Server) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		obj, err := s.readBody(w, r)
		if err != nil {
			return err
		}
		name, err := obj.String("name")
		if err != nil {
			return err
		}
		if strings.TrimSpace(name) == "" {
			return badRequest("name must not be empty")
		}
		v, err := o.create(r.Context(), name)
		if err != nil {
			return err
		}
		return httpx.WriteJSON(w, http.StatusCreated, v)
	}
}

func (o owner) listHandler(w http.ResponseWriter, r *http.Request) error {
	page, err := parsePage(r)
	if err != nil {
		return err
	}
	views, next, err := o.list(r.Context(), page)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, httpx.NewPage(views, next))
}

func (o owner) getHandler(w http.ResponseWriter, r *http.Request) error {
	v, err := o.get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, v)
}

// deleteHandler is DELETE /admin/v1/{environments|machines}/{id}: 404 for
// an unknown id, 409 conflict while a profile refers to it; otherwise its
// credentials are revoked with it and their live connections closed.
func (o owner) deleteHandler(s *Server) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		revoked, err := o.del(r.Context(), r.PathValue("id"))
		if err != nil {
			return err
		}
		s.revoked(revoked...)
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

// createCredential is POST …/{id}/credentials: a new credential whose
// secret is shown once. The request body, if any, is not read.
func (o owner) createCredential(s *Server) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		c, plain := baton.MintExecutorCredential(o.scope, r.PathValue("id"))
		if err := s.opts.Executors.CreateExecutorCredential(r.Context(), c); err != nil {
			return err
		}
		return httpx.WriteJSON(w, http.StatusCreated, credentialCreated{
			ID: c.ID, Secret: plain, Prefix: c.Prefix, Scope: c.Scope, OwnerID: c.OwnerID,
			CreatedAt: baton.FormatTime(c.CreatedAt),
		})
	}
}

// listCredentials is GET …/{id}/credentials: an unknown owner is 404
// before the limit is validated, as for a session's events.
func (o owner) listCredentials(s *Server) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		q, err := httpx.ParsePageQuery(r)
		if err != nil {
			return err
		}
		ctx := r.Context()
		id := r.PathValue("id")
		if _, err := o.get(ctx, id); err != nil {
			return err
		}
		page, err := q.Page()
		if err != nil {
			return err
		}
		items, next, err := s.opts.Executors.ListExecutorCredentials(ctx, o.scope, id, page)
		if err != nil {
			return err
		}
		views := make([]credentialView, len(items))
		for i, c := range items {
			views[i] = credentialView{
				ID: c.ID, Prefix: c.Prefix, Scope: c.Scope, OwnerID: c.OwnerID,
				CreatedAt: baton.FormatTime(c.CreatedAt), RevokedAt: optTime(c.RevokedAt),
			}
		}
		return httpx.WriteJSON(w, http.StatusOK, httpx.NewPage(views, next))
	}
}

// revokeCredential is DELETE …/{id}/credentials/{cred_id}: 404 for an
// unknown owner, then for anything but an active credential of it.
func (o owner) revokeCredential(s *Server) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		ctx := r.Context()
		id, credID := r.PathValue("id"), r.PathValue("cred_id")
		if _, err := o.get(ctx, id); err != nil {
			return err
		}
		if err := s.opts.Executors.RevokeExecutorCredential(ctx, o.scope, id, credID); err != nil {
			return err
		}
		s.revoked(credID)
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

// revoked tells the revoker (the token service, the executor hub) about
// revoked credentials.
func (s *Server) revoked(ids ...string) {
	if s.opts.Revoker == nil {
		return
	}
	for _, id := range ids {
		s.opts.Revoker.RevokeCredential(id)
	}
}

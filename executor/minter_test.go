package executor

import (
	"context"
	"fmt"
	"testing"

	"github.com/baton-engine/baton/executor/proto"
	"github.com/baton-engine/baton/filearea"
	"github.com/google/go-cmp/cmp"
)

// fakeViewTokens renders grants as readable tokens.
type fakeViewTokens struct{ issued []filearea.ViewGrant }

func (f *fakeViewTokens) Issue(g filearea.ViewGrant) (string, error) {
	f.issued = append(f.issued, g)
	return fmt.Sprintf("tok:%s:%s:%d:%v", g.SessionID, g.View, g.Epoch, g.Readonly), nil
}

func (f *fakeViewTokens) Verify(string) (*filearea.ViewGrant, error) { panic("not used") }

type fakeMountBinding struct {
	epoch int64
	sent  [][]proto.FsView
}

func (b *fakeMountBinding) SessionID() string { return "ses_1" }
func (b *fakeMountBinding) Epoch() int64      { return b.epoch }
func (b *fakeMountBinding) Mount(_ context.Context, views []proto.FsView) ([]string, error) {
	b.sent = append(b.sent, views)
	var names []string
	for _, v := range views {
		names = append(names, v.View)
	}
	return names, nil
}

func TestMinter(t *testing.T) {
	tokens := &fakeViewTokens{}
	m := &Minter{Origin: "https://baton.example/", Tokens: tokens}
	b := &fakeMountBinding{epoch: 3}
	mounted, err := m.Mount(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	want := []proto.FsView{{View: "workspace", Path: "/sessions/ses_1/workspace", ServiceURL: "https://baton.example/v1/fs/ses_1/workspace",
		Token: "tok:ses_1:workspace:3:false"}}
	if diff := cmp.Diff([][]proto.FsView{want}, b.sent); diff != "" {
		t.Errorf("fs.mount views (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"workspace"}, mounted); diff != "" {
		t.Errorf("mounted (-want +got):\n%s", diff)
	}

	// A resume moves the binding to a new epoch: the views are minted
	// for it, with the read-only flag and root of each view.
	m.Views = []View{Workspace(), {Name: "out", Path: "/out", Root: "results", Readonly: true}}
	b.epoch = 4
	if _, err := m.Mount(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	got := b.sent[1]
	if len(got) != 2 || got[0].Token != "tok:ses_1:workspace:4:false" || got[1].Token != "tok:ses_1:out:4:true" || !got[1].Readonly || got[1].Path != "/sessions/ses_1/out" {
		t.Errorf("views after resume: %+v", got)
	}
	if g := tokens.issued[len(tokens.issued)-1]; g.Root != "results" || g.View != "out" {
		t.Errorf("grant of the read-only view: %+v", g)
	}

	// A sandbox binding mounts the files of the session it serves.
	if _, err := m.MountArea(context.Background(), b, "ses_owner"); err != nil {
		t.Fatal(err)
	}
	got = b.sent[2]
	if got[0].ServiceURL != "https://baton.example/v1/fs/ses_owner/workspace" || got[0].Token != "tok:ses_owner:workspace:4:false" ||
		got[0].Path != "/sessions/ses_1/workspace" { // below the binding's session, not the area's
		t.Errorf("MountArea views: %+v", got)
	}
}

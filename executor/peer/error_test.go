package peer

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/executor/proto"
)

func TestFromError(t *testing.T) {
	var seq int64 = 3
	conflict := proto.Conflict("sequence_gap", "gap", &seq)
	tests := []struct {
		err  error
		want *proto.Error
	}{
		{conflict, conflict},
		{proto.Errorf(proto.CodeForbidden, "no"), &proto.Error{Code: proto.CodeForbidden, Message: "no"}},
		{os.ErrClosed, &proto.Error{Code: proto.CodeInternal, Message: "Internal error"}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, FromError(tc.err)); diff != "" {
			t.Errorf("FromError(%v) (-want +got):\n%s", tc.err, diff)
		}
	}
}

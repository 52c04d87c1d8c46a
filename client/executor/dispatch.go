package executor

import (
	"encoding/json"

	"github.com/baton-engine/baton/executor/proto"
)

// request is one harness request being served.
type request struct {
	c      *conn
	id     json.RawMessage
	params json.RawMessage
}

func (r *request) reply(result any, rerr *RPCError) { r.c.reply(r.id, result, rerr) }

// later is what a handler returns when it replies itself.
type later struct{}

// dispatch serves one harness request or notification. It runs on the
// connection's reader, so handlers never wait on the harness: anything
// slow runs on a goroutine of its own and replies from there.
func (e *Executor) dispatch(c *conn, f *proto.Frame) {
	if f.Kind() == proto.KindNotification {
		switch f.Method {
		case proto.MethodClose:
			var p proto.Reason
			_ = json.Unmarshal(f.Params, &p)
			c.log.Info("executor: the harness closes the connection", "reason", p.Reason)
			c.setNotified(p)
		default:
			c.log.Debug("executor: notification ignored", "method", f.Method)
		}
		return
	}
	r := &request{c: c, id: f.ID, params: f.Params}
	var res any
	var rerr *RPCError
	switch f.Method {
	case proto.MethodToolCall:
		res, rerr = e.onToolCall(r)
	case proto.MethodToolCancel:
		res, rerr = e.onToolCancel(r)
	case proto.MethodSessionAssign:
		res, rerr = e.onAssign(r)
	case proto.MethodSessionStop:
		res, rerr = e.onStop(r)
	case proto.MethodDrain:
		res, rerr = e.onDrain(r)
	case proto.MethodTurnStart:
		res, rerr = e.onTurnStart(r)
	case proto.MethodTurnInput:
		res, rerr = e.onTurnInput(r)
	case proto.MethodTurnCancel:
		res, rerr = e.onTurnCancel(r)
	case proto.MethodSessionClose:
		res, rerr = e.onSessionClose(r)
	case proto.MethodInteractionResponse:
		res, rerr = e.onInteractionResponse(r)
	case proto.MethodCustomToolResult:
		res, rerr = e.onCustomToolResult(r)
	case proto.MethodFsMount:
		res, rerr = e.onFsMount(r)
	case proto.MethodFsUnmount:
		res, rerr = e.onFsUnmount(r)
	default:
		rerr = rpcErr(CodeMethodNotFound, "method not found: "+f.Method, nil)
	}
	if _, ok := res.(later); ok && rerr == nil {
		return
	}
	r.reply(res, rerr)
}

package executor

import (
	"encoding/json"
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
func (e *Executor) dispatch(c *conn, f *frame) {
	if f.kind() == kindNotification {
		switch f.Method {
		case "executor.close":
			var p reasonParams
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
	case "tool.call":
		res, rerr = e.onToolCall(r)
	case "tool.cancel":
		res, rerr = e.onToolCancel(r)
	case "session.assign":
		res, rerr = e.onAssign(r)
	case "session.stop":
		res, rerr = e.onStop(r)
	case "executor.drain":
		res, rerr = e.onDrain(r)
	case "turn.start":
		res, rerr = e.onTurnStart(r)
	case "turn.input":
		res, rerr = e.onTurnInput(r)
	case "turn.cancel":
		res, rerr = e.onTurnCancel(r)
	case "session.close":
		res, rerr = e.onSessionClose(r)
	case "interaction.response":
		res, rerr = e.onInteractionResponse(r)
	case "agent.custom_tool_result":
		res, rerr = e.onCustomToolResult(r)
	case "fs.mount":
		res, rerr = e.onFsMount(r)
	case "fs.unmount":
		res, rerr = e.onFsUnmount(r)
	default:
		rerr = rpcErr(CodeMethodNotFound, "method not found: "+f.Method, nil)
	}
	if _, ok := res.(later); ok && rerr == nil {
		return
	}
	r.reply(res, rerr)
}

// ack is the {ok:true} result.
type ack struct {
	OK bool `json:"ok"`
}

type accepted struct {
	Accepted bool `json:"accepted"`
}

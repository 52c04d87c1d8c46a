package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/baton-engine/baton/executor/proto"
)

// ProcessExec is the tool.call name of a remote shell command.
const ProcessExec = "process.exec"

// ToolDef declares a tool: the same shape as a Baton client tool. A nil
// InputSchema is sent as an empty object schema; "parameters" is read
// as an alias of "input_schema".
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// emptySchema is the input schema of a tool that declares none.
const emptySchema = `{"type":"object","properties":{}}`

// MarshalJSON fills in the empty object schema.
func (d ToolDef) MarshalJSON() ([]byte, error) {
	type plain ToolDef
	if len(d.InputSchema) == 0 {
		d.InputSchema = json.RawMessage(emptySchema)
	}
	return json.Marshal(plain(d))
}

// UnmarshalJSON accepts "parameters" as an alias of "input_schema".
func (d *ToolDef) UnmarshalJSON(b []byte) error {
	var w struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	d.Name, d.Description, d.InputSchema = w.Name, w.Description, w.InputSchema
	if len(d.InputSchema) == 0 {
		d.InputSchema = w.Parameters
	}
	return nil
}

// Tool is a tool this executor serves. Handle runs on its own goroutine
// for each call; its ctx ends on tool.cancel, session.stop, the call's
// timeout_ms, or Close.
type Tool struct {
	Def    ToolDef
	Handle func(ctx context.Context, c Call) (Result, error)
}

// Call is one tool.call.
type Call struct {
	SessionID string
	ID        string // tool_call_id
	Name      string
	Input     json.RawMessage
	Timeout   time.Duration // timeout_ms; 0 when none was given

	e *Executor
}

// Progress reports progress with a tool.progress notification. It is
// lossy: while the executor is disconnected it returns ErrDisconnected
// and nothing is sent. total <= 0 is left out.
func (c Call) Progress(msg string, progress, total float64) error {
	if c.e == nil {
		return ErrDisconnected
	}
	p := proto.ToolProgressParams{SessionID: c.SessionID, ToolCallID: c.ID, Message: msg, Progress: &progress}
	if total > 0 {
		p.Total = &total
	}
	return c.e.notifyLive(proto.MethodToolProgress, p)
}

// Event emits a durable session event for the call's session
// (session.event {session_id, epoch, event:{type, data}}), which Baton
// stores in the session's log as executor.event. Like tool.result it is
// held until the harness acknowledges it and re-sent after a reconnect,
// and it reaches the harness before the call's result. data is encoded as
// JSON (nil is null).
func (c Call) Event(typ string, data any) error {
	if c.e == nil {
		return ErrDisconnected
	}
	return c.e.handEvent(c.SessionID, typ, data)
}

// handEvent holds a tool or shell executor's session.event.
func (e *Executor) handEvent(session, typ string, data any) error {
	if typ == "" {
		return errors.New("executor: event without a type")
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("executor: encode event data: %w", err)
	}
	e.mu.Lock()
	var epoch int64
	if h := e.hands[session]; h != nil {
		epoch = h.epoch
	}
	e.mu.Unlock()
	ev, err := json.Marshal(proto.ToolEvent{Type: typ, Data: raw})
	if err != nil {
		return fmt.Errorf("executor: encode event: %w", err)
	}
	return e.push(proto.MethodSessionEvent, session, proto.SessionEventParams{SessionID: session, Epoch: epoch, Event: ev}, nil)
}

// Result is a tool call's outcome, sent as tool.result. Content is a JSON
// array of content blocks or any JSON value; nil is sent as [].
type Result struct {
	Content json.RawMessage
	IsError bool
}

// TextResult is a result with one text block.
func TextResult(text string) Result {
	b, _ := json.Marshal([]map[string]string{{"type": "text", "text": text}})
	return Result{Content: b}
}

// ErrorResult is an is_error result with one text block.
func ErrorResult(text string) Result {
	r := TextResult(text)
	r.IsError = true
	return r
}

// JSONResult is a result whose content is v encoded as JSON.
func JSONResult(v any) (Result, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Result{}, fmt.Errorf("encode result: %w", err)
	}
	return Result{Content: b}, nil
}

// runningCall is a tool call whose handler has not finished.
type runningCall struct {
	session  string
	cancel   context.CancelFunc
	done     chan struct{} // closed after its tool.result is held
	canceled bool          // tool.cancel or session.stop
	cut      bool          // Close answered it already; the handler's outcome is dropped
}

type handler func(ctx context.Context, c Call) (Result, error)

// handlerFor finds who serves name.
func (e *Executor) handlerFor(name string) (handler, bool) {
	if name == ProcessExec {
		if e.cfg.Process == nil {
			return nil, false
		}
		return e.execTool, true
	}
	t, ok := e.tools[name]
	return t.Handle, ok
}

func (e *Executor) onToolCall(r *request) (any, *RPCError) {
	var p proto.ToolCallParams
	if rerr := decodeParams(r.params, &p); rerr != nil {
		return nil, rerr
	}
	if rerr := require("tool_call_id", p.ToolCallID, "name", p.Name); rerr != nil {
		return nil, rerr
	}
	e.mu.Lock()
	if _, running := e.calls[p.ToolCallID]; running || e.finished.has(p.ToolCallID) {
		e.mu.Unlock()
		e.log.Debug("executor: duplicate tool call acked", "tool_call_id", p.ToolCallID)
		return proto.Accepted{Accepted: true}, nil
	}
	if e.draining {
		e.mu.Unlock()
		return nil, errDraining()
	}
	h, ok := e.handlerFor(p.Name)
	if !ok {
		e.mu.Unlock()
		return nil, capabilityMissing("tool:" + p.Name)
	}
	if hd := e.hands[p.SessionID]; hd != nil && hd.stopping {
		e.mu.Unlock()
		return nil, rpcErr(CodeConflict, "session is stopping", map[string]string{"reason": "stopping"})
	}
	ctx, cancel := context.WithCancel(e.life)
	rc := &runningCall{session: p.SessionID, cancel: cancel, done: make(chan struct{})}
	e.calls[p.ToolCallID] = rc
	e.startLocked()
	e.mu.Unlock()

	r.reply(proto.Accepted{Accepted: true}, nil)
	call := Call{SessionID: p.SessionID, ID: p.ToolCallID, Name: p.Name, Input: p.Input,
		Timeout: time.Duration(p.TimeoutMS) * time.Millisecond, e: e}
	if !e.goCounted(func() { e.runCall(ctx, rc, h, call) }) {
		cancel()
		e.mu.Lock()
		delete(e.calls, p.ToolCallID)
		e.mu.Unlock()
	}
	return later{}, nil
}

// runCall runs a handler and holds its tool.result.
func (e *Executor) runCall(ctx context.Context, rc *runningCall, h handler, call Call) {
	defer rc.cancel()
	hctx := ctx
	if call.Timeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, call.Timeout)
		defer cancel()
	}
	res, err := safeHandle(hctx, h, call)
	if err != nil {
		switch {
		case errors.Is(hctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
			res = ErrorResult(fmt.Sprintf("tool call timed out after %s", call.Timeout))
		case ctx.Err() != nil:
			res = ErrorResult("tool call canceled")
		default:
			res = ErrorResult(err.Error())
		}
	}
	e.mu.Lock()
	if rc.cut {
		e.mu.Unlock()
		close(rc.done)
		return
	}
	if rc.canceled && !res.IsError {
		res = ErrorResult("tool call canceled")
	}
	delete(e.calls, call.ID)
	e.finished.add(call.ID)
	end := e.oneShotDoneLocked(call.SessionID)
	e.mu.Unlock()

	if len(res.Content) == 0 {
		res.Content = json.RawMessage("[]")
	}
	if err := e.push(proto.MethodToolResult, call.SessionID, proto.ToolResultParams{
		SessionID: call.SessionID, ToolCallID: call.ID, Content: res.Content, IsError: res.IsError,
	}, nil); err != nil {
		e.log.Error("executor: tool result not encodable", "tool_call_id", call.ID, "err", err)
		_ = e.push(proto.MethodToolResult, call.SessionID, proto.ToolResultParams{
			SessionID: call.SessionID, ToolCallID: call.ID, Content: ErrorResult("result not encodable").Content, IsError: true,
		}, nil)
	}
	close(rc.done)
	if end != nil {
		e.pushEnded(call.SessionID, end.epoch, "completed", false)
	}
}

// safeHandle runs h, turning a panic into an error.
func safeHandle(ctx context.Context, h handler, c Call) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("tool handler panicked: %v", v)
		}
	}()
	return h(ctx, c)
}

func (e *Executor) onToolCancel(r *request) (any, *RPCError) {
	var p proto.ToolCancelParams
	if rerr := decodeParams(r.params, &p); rerr != nil {
		return nil, rerr
	}
	e.mu.Lock()
	rc, ok := e.calls[p.ToolCallID]
	ok = ok && (p.SessionID == "" || rc.session == p.SessionID)
	if ok {
		rc.canceled = true
		rc.cancel()
	}
	e.mu.Unlock()
	return proto.ToolCancelResult{Canceled: ok}, nil
}

// cutCall is a running tool call that Close answers itself.
type cutCall struct {
	session, id string
}

// cutCallsLocked cancels every running tool call and takes its answer
// over from its handler (see answerCut). e.mu is held.
func (e *Executor) cutCallsLocked() []cutCall {
	out := make([]cutCall, 0, len(e.calls))
	for id, rc := range e.calls {
		rc.cut = true
		rc.cancel()
		delete(e.calls, id)
		e.finished.add(id)
		out = append(out, cutCall{session: rc.session, id: id})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// answerCut sends an is_error tool.result for each call Close cut, so
// that the model learns at once why it did not finish, and waits until
// the harness acknowledged them, c stopped being the live connection, or
// ctx ended.
func (e *Executor) answerCut(ctx context.Context, c *conn, cut []cutCall) {
	if len(cut) == 0 {
		return
	}
	e.mu.Lock()
	why := "the executor stopped"
	if e.draining {
		why = "the executor stopped (drain timed out)"
	}
	e.mu.Unlock()
	var acked atomic.Int64
	onAck := func(_ json.RawMessage, rerr *RPCError) {
		if rerr != nil {
			e.log.Warn("executor: harness refused a tool result at close", "err", rerr)
		}
		acked.Add(1)
		e.out.poke()
	}
	for _, k := range cut {
		if err := e.push(proto.MethodToolResult, k.session, proto.ToolResultParams{
			SessionID: k.session, ToolCallID: k.id, Content: ErrorResult(why).Content, IsError: true,
		}, onAck); err != nil {
			e.log.Error("executor: tool result at close not encodable", "tool_call_id", k.id, "err", err)
			acked.Add(1)
		}
	}
	_ = e.out.waitUntil(ctx, func() bool {
		live, _ := e.out.current()
		return acked.Load() == int64(len(cut)) || live != c
	})
}

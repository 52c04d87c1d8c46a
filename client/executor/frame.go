package executor

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/baton-engine/baton/executor/proto"
)

// Protocol is the WebSocket subprotocol and the executor.register
// protocol value this package speaks.
const Protocol = proto.SubprotocolV11

// MaxMessageSize bounds one WebSocket message in either direction.
const MaxMessageSize = proto.MaxMessage

// Frames are package proto's: the harness's frames are decoded with
// proto.DecodeLoose, the executor's tolerant rules.

// numericID returns the id of a response to one of our requests; ok is
// false for ids we never send (strings, fractions, null).
func numericID(f *proto.Frame) (int64, bool) {
	if len(f.ID) == 0 || f.ID[0] == '"' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(f.ID), 10, 64)
	return n, err == nil
}

// encodeRequest renders a request (id > 0) or a notification (id == 0).
func encodeRequest(id int64, method string, params any) ([]byte, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("encode %s params: %w", method, err)
	}
	return proto.EncodeCall(uint64(id), method, p), nil
}

// encodeResponse renders the answer to a harness request: result, or
// rerr when it is non-nil.
func encodeResponse(id json.RawMessage, result any, rerr *RPCError) ([]byte, error) {
	if rerr != nil {
		return proto.EncodeError(id, (*proto.Error)(rerr)), nil
	}
	b, err := proto.EncodeResult(id, result)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return b, nil
}

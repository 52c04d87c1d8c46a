package httpapi

import (
	"encoding/json"
	"fmt"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

// decodeOpenRequest decodes the body of an open or join request
// (BAE's client API) as BAE's JSON extractor does: bad syntax is a 400
// rejection, a wrong shape (a list that is null or not an array, a tool
// without a string name, …) a 422 rejection, unknown members are ignored and
// absent lists are empty. Tool definitions come out normalized: description
// nil when absent or null, input_schema {} when absent or null, prompt_via
// "stdin" when absent or null.
func decodeOpenRequest(body []byte) (*baton.OpenRequest, error) {
	obj, err := httpx.DecodeObject(body)
	if err != nil {
		return nil, err
	}
	req := &baton.OpenRequest{}
	if req.ClientVersion, err = obj.OptString("client_version"); err != nil {
		return nil, err
	}
	if req.Tools, err = decodeTools(obj, "tools"); err != nil {
		return nil, err
	}
	if req.SandboxTools, err = decodeTools(obj, "sandbox_tools"); err != nil {
		return nil, err
	}
	if req.SubagentTools, err = decodeSubagentTools(obj); err != nil {
		return nil, err
	}
	return req, nil
}

// decodeTools decodes the ClientToolDef array member key.
func decodeTools(obj httpx.Object, key string) ([]baton.ToolDef, error) {
	elems, err := obj.Array(key)
	if err != nil {
		return nil, err
	}
	tools := make([]baton.ToolDef, len(elems))
	for i, raw := range elems {
		o, err := httpx.ObjectAt(index(obj.Path(key), i), raw)
		if err != nil {
			return nil, err
		}
		if tools[i], err = decodeTool(o); err != nil {
			return nil, err
		}
	}
	return tools, nil
}

// decodeTool decodes the members a ClientToolDef and a SubagentToolDef
// share.
func decodeTool(o httpx.Object) (baton.ToolDef, error) {
	var t baton.ToolDef
	var err error
	if t.Name, err = o.String("name"); err != nil {
		return t, err
	}
	if t.Description, err = o.OptString("description"); err != nil {
		return t, err
	}
	t.InputSchema = json.RawMessage("{}")
	if raw, ok := o.Raw("input_schema"); ok {
		t.InputSchema = raw
	}
	return t, nil
}

// decodeSubagentTools decodes the subagent_tools member.
func decodeSubagentTools(obj httpx.Object) ([]baton.SubagentToolDef, error) {
	elems, err := obj.Array("subagent_tools")
	if err != nil {
		return nil, err
	}
	tools := make([]baton.SubagentToolDef, len(elems))
	for i, raw := range elems {
		o, err := httpx.ObjectAt(index(obj.Path("subagent_tools"), i), raw)
		if err != nil {
			return nil, err
		}
		if tools[i], err = decodeSubagentTool(o); err != nil {
			return nil, err
		}
	}
	return tools, nil
}

// decodeSubagentTool decodes one SubagentToolDef.
func decodeSubagentTool(o httpx.Object) (baton.SubagentToolDef, error) {
	var t baton.SubagentToolDef
	def, err := decodeTool(o)
	if err != nil {
		return t, err
	}
	t.Name, t.Description, t.InputSchema = def.Name, def.Description, def.InputSchema
	if t.Image, err = o.String("image"); err != nil {
		return t, err
	}
	elems, err := o.RequiredArray("subagents")
	if err != nil {
		return t, err
	}
	t.Subagents = make([]baton.SubagentDef, len(elems))
	for i, raw := range elems {
		so, err := httpx.ObjectAt(index(o.Path("subagents"), i), raw)
		if err != nil {
			return t, err
		}
		if t.Subagents[i], err = decodeSubagent(so); err != nil {
			return t, err
		}
	}
	return t, nil
}

// decodeSubagent decodes one SubagentDef. prompt_via is any string here;
// the session service validates it.
func decodeSubagent(o httpx.Object) (baton.SubagentDef, error) {
	var d baton.SubagentDef
	var err error
	if d.Harness, err = o.String("harness"); err != nil {
		return d, err
	}
	if d.CommandTemplate, err = o.String("command_template"); err != nil {
		return d, err
	}
	via, err := o.OptString("prompt_via")
	if err != nil {
		return d, err
	}
	d.PromptVia = "stdin"
	if via != nil {
		d.PromptVia = *via
	}
	if d.TimeoutSecs, err = o.OptUint("timeout_secs"); err != nil {
		return d, err
	}
	return d, nil
}

// index returns the path of element i of the array at path.
func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

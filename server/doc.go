// Package server is glmrun's OpenAI-compatible HTTP API: the handler behind
// "glmrun serve".
//
// It answers GET /v1/models, POST /v1/chat/completions, POST /v1/completions,
// GET /health and GET /metrics (Prometheus text format), with the request and
// response shapes of OpenAI's API and the conventions of llama.cpp's
// llama-server and vLLM where OpenAI says nothing: GLM thinking is returned as
// reasoning_content beside content; GLM tool calls
// (<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>)
// become OpenAI tool_calls when the request has tools. Streaming answers are
// Server-Sent Events ("data: {...}\n\n" chunks ending with "data: [DONE]"),
// flushed per token, never splitting a UTF-8 character; every text is valid
// UTF-8 (a byte no character can be made of becomes U+FFFD), and the
// streamed pieces add up to the whole answer.
//
// It also answers Anthropic's Messages API, POST /v1/messages and
// POST /v1/messages/count_tokens, for clients such as Claude Code and the
// Anthropic SDKs: a request is read into the same conversation an OpenAI
// chat request is (system, text, thinking, tool_use and tool_result blocks
// become the template's system, user, assistant and tool messages) and
// runs through the same template, scheduler and reply parser, so the two
// APIs give one conversation the same prompt. The reply comes back as
// content blocks (thinking, text, tool_use) with Anthropic's stop_reason
// (end_turn, max_tokens, stop_sequence, tool_use) and usage, whose
// cache_read_input_tokens are the prompt tokens found in a slot's KV
// cache; a stream is Anthropic's named events (message_start, ping,
// content_block_start/delta/stop, message_delta, message_stop). thinking
// {"type": "disabled"} turns thinking off, "enabled" (budget_tokens is not
// enforced) and "adaptive" leave it on. These endpoints take the API key
// as x-api-key too, and answer errors in Anthropic's shape,
// {"type": "error", "error": {"type", "message"}}: invalid_request_error
// (400, 405), authentication_error (401), not_found_error (404),
// request_too_large (413), overloaded_error (529, a full queue or a
// server shutting down) and api_error (500); a prompt over the context is
// "prompt is too long: N tokens > M maximum", as Anthropic words it.
//
// Beside them it answers llama-server's small endpoints, with
// llama-server's shapes: POST /tokenize ({"content", "add_special",
// "parse_special", "with_pieces"}; pieces are text, or byte values where a
// token holds part of a character), POST /detokenize ({"tokens"}; an id
// outside the vocabulary is a 400 naming it), POST /apply-template (a chat
// request's body; the prompt text /v1/chat/completions would tokenize for
// it), GET /props (n_ctx, the default sampling params, total_slots,
// model_path, chat_template) and GET /slots (each slot created so far:
// is_processing, n_cached, the tokens its KV cache holds, and the running
// request's progress). With an API key they need it, as llama-server's do.
//
// Thinking is on by default and switched per request with
// chat_template_kwargs {"enable_thinking": false}, as in llama-server and
// vLLM (every chat_template_kwargs entry is a template variable), or with
// OpenAI's reasoning_effort: "none" turns it off; GLM knows no levels, so
// "minimal" to "xhigh" leave it on (a template that reads reasoning_effort
// gets it); enable_thinking wins when both are given. With thinking on the
// prompt opens the reasoning block, so a reply that never closes it (cut
// by max_tokens, say) is all reasoning_content, with content "", as
// llama-server and vLLM return it.
//
// Control tokens (<|assistant|>, [gMASK], GLM's markup tags) are never part
// of content, reasoning_content or a completion's text: the markup is parsed
// and removed, other control tokens are dropped, and stop strings do not
// match them. Config.Special (llama-server's --special) shows them.
//
// One scheduler goroutine owns the model: up to Config.Parallel sequences,
// each with its own KV cache slot, advance together, one token each per step
// (continuous batching); a new request is prefilled between steps and then
// joins the step. Requests beyond the slots wait in a bounded queue, and a full
// queue answers 503. A request whose client goes away leaves the queue at
// once, or, running, is dropped at the next step and its slot freed; either
// way it counts as canceled. A step is one batched pass (model.DecodeBatch):
// with a model loaded with batch-invariant products
// (glmrun.Options.BatchInvariant, "glmrun serve --batch-invariant") every
// request gets the tokens it gets alone; by default steps of 16 or more
// sequences agree with that within float rounding, as llama-server's and
// vLLM's batches do.
//
// Errors have OpenAI's shape, {"error": {"message", "type", "param", "code"}}:
// 400 for malformed JSON and invalid parameters (code invalid_json,
// invalid_type or invalid_value, param naming the field), and for a prompt
// that does not fit the context (code context_length_exceeded, param
// "messages" or "prompt", as OpenAI answers it); 401 for a missing or wrong
// API key (invalid_api_key; the Bearer scheme is case-insensitive); 404
// for an unknown model (model_not_found) or path (not_found); 405 for a
// wrong method (method_not_allowed); 413 for a request body over the
// limit (request_too_large); 503 for a full queue (server_busy), a server
// shutting down (shutting_down), or GET /slots?fail_on_no_slot=1 with
// every slot busy (no_slot_available).
//
// The package runs what it is given and logs nothing: loading the model
// (glmrun.Load, the library's one loading path) and listening on a socket
// belong to the caller (cmd/glmrun), which closes the model after the
// Server.
package server

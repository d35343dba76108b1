/* proto.h: the providers' wire protocols. Turns a neutral call.request into
 * one HTTP request, and the provider's bytes back into neutral content,
 * streamed text and normalised usage. No I/O and no credentials here: the
 * caller (cave-call) adds the key header and moves the bytes.
 *
 * The neutral request (fields of a call.request event, borrowed):
 *   provider, model        "anthropic", "claude-haiku-4-5"
 *   api                    one of cave_api_name() below
 *   system                 string (optional)
 *   messages               [{role:"user"|"assistant", content: STRING or
 *                            [BLOCK...]}], BLOCK one of
 *                            {type:"text", text}
 *                            {type:"tool_use", id, name, input:OBJECT}
 *                            {type:"tool_result", tool_use_id, content:STRING,
 *                             is_error:BOOL}  (in a user message)
 *   tools                  [{name, description, input_schema}] (optional)
 *   max_output_tokens      integer
 *   reasoning              null | "low" | "medium" | "high" (optional)
 *   stream                 bool (default true)
 *
 *   Opaque reasoning blocks a response gave back (below) may be passed
 *   in an assistant message unchanged: the protocol that made them sends
 *   them back, the others drop them.
 *
 * The neutral result (cave_acc_result):
 *   {content:[BLOCK...] (text and tool_use blocks as above, in order;
 *             reasoning text is never a text block. Two more kinds exist
 *             only to be sent back, never to be shown or priced:
 *             {type:"thinking", thinking, signature} and
 *             {type:"redacted_thinking", data} (Anthropic, which refuses a
 *             tool round with thinking on without them), and a tool_use
 *             may carry "signature" (Gemini's thoughtSignature). Gemini
 *             calls without an id get "gemini_call_N", N counting the
 *             response's calls from 0),
 *    stop_reason: "end_turn"|"tool_use"|"max_tokens"|"stop_sequence"|
 *                 "refusal"|"other", or null until the provider said,
 *    provider_stop_reason: the provider's own word (string or null),
 *    response_id: string or null,
 *    usage: {input, cache_read, cache_write, cache_write_1h, output,
 *            reasoning (null when not reported)} or null,
 *    usage_basis: "provider_reported" | "unavailable"}
 *   usage is given only for a complete response: the counts of a stream
 *   cut short or failed are not final (they would under-report), so they
 *   are null and "unavailable", never zeros.
 */
#ifndef CAVE_PROTO_H
#define CAVE_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <jv.h>

#include "catalog.h"
#include "msg.h"

enum cave_api {
	CAVE_API_ANTHROPIC,        /* "anthropic-messages" */
	CAVE_API_OPENAI_CHAT,      /* "openai-chat" */
	CAVE_API_OPENAI_RESPONSES, /* "openai-responses" */
	CAVE_API_GEMINI,           /* "gemini" */
	CAVE_API_COUNT
};

const char *cave_api_name(enum cave_api a);
/* -1 when the name is unknown. */
int cave_api_parse(const char *name);
/* The protocol a provider speaks when the request names none:
 * anthropic -> messages, openai -> responses, google -> gemini; -1 else. */
int cave_api_default(const char *provider);

/* One HTTP request, all heap strings the caller frees with
 * cave_http_req_free. headers are "Name: value" lines, NULL-terminated,
 * never a credential. */
struct cave_http_req {
	char *url;
	char *body;
	size_t body_len;
	char *headers[8];
};
void cave_http_req_free(struct cave_http_req *r);

/* Builds the request from req (borrowed). base is the provider's base URL as the official SDKs
 * take it (ANTHROPIC_BASE_URL without /v1, OPENAI_BASE_URL with /v1,
 * GOOGLE_GEMINI_BASE_URL without the version), or NULL for the public
 * default. -1 with e set (code "bad_request") when req lacks what the
 * protocol needs. */
int cave_proto_build(enum cave_api a, jv req, const char *base,
		     struct cave_http_req *out, cave_err *e);

/* The header that carries the key, e.g. "x-api-key"; for OpenAI
 * "Authorization" with value prefix "Bearer ". */
const char *cave_proto_key_header(enum cave_api a, const char **value_prefix);

/* Accumulates one response, streamed or whole. */
struct cave_acc;
typedef void (*cave_delta_fn)(void *ctx, const char *text, size_t len);

struct cave_acc *cave_acc_new(enum cave_api a);
void cave_acc_free(struct cave_acc *acc);
/* One SSE event of a streamed response. Text deltas go to fn as they
 * arrive. -1 with e set on an error event in the stream (code
 * "provider_error", or "overloaded"/"rate_limited" with retryable set) or
 * on data that is not what the protocol allows (code "malformed_stream"). */
int cave_acc_event(struct cave_acc *acc, const char *event, const char *data,
		   size_t len, cave_delta_fn fn, void *ctx, cave_err *e);
/* A whole (non-streamed) response body; same errors ("malformed_response"). */
int cave_acc_body(struct cave_acc *acc, const char *body, size_t len,
		  cave_err *e);
/* True once the protocol's terminal event was seen (message_stop,
 * [DONE] or the final usage chunk, response.completed, a candidate with
 * finishReason and usageMetadata). */
bool cave_acc_complete(const struct cave_acc *acc);
/* The neutral result so far (a new jv). usage is null and usage_basis
 * "unavailable" when the provider never reported it. */
jv cave_acc_result(const struct cave_acc *acc);

/* The usage the provider reported so far, complete or not (a new jv:
 * the neutral usage object, or null when none came). For a response cut
 * short it is a lower bound (Anthropic's message_start output count is a
 * placeholder); cave_acc_result gives it only once the response is whole. */
jv cave_acc_usage_so_far(const struct cave_acc *acc);

/* The provider's error body of a failed HTTP status, in one line: the
 * message the provider put in it, else the start of the body. */
void cave_proto_error_message(enum cave_api a, const char *body, size_t len,
			      char *out, size_t outsz);

/* Raw provider usage (borrowed) to a normalised cave_usage; table-driven
 * per protocol, minding that OpenAI and Gemini prompt counts include cached
 * tokens, Gemini thoughts sit outside candidates, and Anthropic
 * message_delta usage is cumulative. */
int cave_usage_from_provider(enum cave_api a, jv raw, struct cave_usage *u);
/* The neutral usage object (as in the result above) to and from the struct.
 * to_jv gives null when u is not available. from_jv borrows usage: null is
 * 0 with available false; -1 (available false) when it is not a whole
 * usage object. from_provider is -1 when raw lacks the counts the protocol
 * always reports, or a count is not a non-negative integer. */
jv cave_usage_to_jv(const struct cave_usage *u);
int cave_usage_from_jv(jv usage, struct cave_usage *u);

#endif

/* turn.h: the turn loop's data, pure and without I/O: the call.request a
 * turn sends (from the agent and the message history, in the neutral
 * format of proto.h), the tool_use blocks a response asks for, and the
 * tool_result blocks that answer them. Never runs a tool, never journals. */
#ifndef CAVE_TURN_H
#define CAVE_TURN_H

#include <stdbool.h>
#include <jv.h>

#include "agent.h"

/* The body of a call.request (no envelope): provider, model, api, system,
 * messages (borrowed, copied in), tools, max_output_tokens, reasoning,
 * stream, purpose "turn". */
jv cave_turn_request(const struct cave_agent *a, jv messages, const char *id);

/* The tool_use blocks of a response's content (borrowed): a new array. */
jv cave_turn_tool_uses(jv content);

/* A tool_result block for tool_use_id from a tool.result event (borrowed):
 * content is the output (with a note when it was truncated or denied),
 * is_error when the tool was denied, killed or exited non-zero. */
jv cave_turn_result_block(const char *tool_use_id, jv result);
/* A tool_result block the head makes itself (is_error true). */
jv cave_turn_error_block(const char *tool_use_id, const char *text);

/* A message {role, content} (content consumed). */
jv cave_turn_message(const char *role, jv content);

/* A stable signature of a tool call: sha256 of its name and its input in
 * canonical form (keys sorted), for repeat detection. */
void cave_turn_signature(const char *name, jv input, char out[65]);

#endif

/* turn.c: builds call.request bodies and tool_result blocks for the turn
 * loop. It never holds state between turns: the head owns the history. */
#include <stdio.h>
#include <string.h>

#include "digest.h"
#include "event.h"
#include "turn.h"

jv cave_turn_request(const struct cave_agent *a, jv messages, const char *id)
{
	jv r = jv_object();
	r = jv_object_set(r, jv_string("id"), jv_string(id));
	r = jv_object_set(r, jv_string("provider"), jv_string(a->provider));
	r = jv_object_set(r, jv_string("model"), jv_string(a->model));
	r = jv_object_set(r, jv_string("api"), jv_string(a->api));
	if (a->system)
		r = jv_object_set(r, jv_string("system"), jv_string(a->system));
	r = jv_object_set(r, jv_string("messages"), jv_copy(messages));
	if (a->ntools)
		r = jv_object_set(r, jv_string("tools"), cave_agent_request_tools(a));
	r = jv_object_set(r, jv_string("max_output_tokens"),
			  jv_number((double)a->max_output_tokens));
	r = jv_object_set(r, jv_string("reasoning"),
			  a->reasoning ? jv_string(a->reasoning) : jv_null());
	r = jv_object_set(r, jv_string("stream"), jv_true());
	return jv_object_set(r, jv_string("purpose"), jv_string("turn"));
}

jv cave_turn_tool_uses(jv content)
{
	jv out = jv_array();
	if (jv_get_kind(content) != JV_KIND_ARRAY)
		return out;
	jv_array_foreach(content, i, b) {
		(void)i;
		if (jv_get_kind(b) == JV_KIND_OBJECT &&
		    strcmp(cave_jv_str(b, "type", ""), "tool_use") == 0)
			out = jv_array_append(out, b);
		else
			jv_free(b);
	}
	return out;
}

jv cave_turn_message(const char *role, jv content)
{
	jv m = jv_object_set(jv_object(), jv_string("role"), jv_string(role));
	return jv_object_set(m, jv_string("content"), content);
}

static jv block(const char *tool_use_id, jv text, bool err)
{
	jv b = jv_object_set(jv_object(), jv_string("type"), jv_string("tool_result"));
	b = jv_object_set(b, jv_string("tool_use_id"), jv_string(tool_use_id));
	b = jv_object_set(b, jv_string("content"), text);
	return jv_object_set(b, jv_string("is_error"), err ? jv_true() : jv_false());
}

jv cave_turn_error_block(const char *tool_use_id, const char *text)
{
	return block(tool_use_id, jv_string(text), true);
}

jv cave_turn_result_block(const char *tool_use_id, jv result)
{
	jv denied = jv_object_get(jv_copy(result), jv_string("denied"));
	jv exitv = jv_object_get(jv_copy(result), jv_string("exit"));
	jv sig = jv_object_get(jv_copy(result), jv_string("signal"));
	const char *out = cave_jv_str(result, "output", "");
	bool err = false;
	jv text;
	char note[256];

	note[0] = '\0';
	if (jv_get_kind(denied) == JV_KIND_STRING ||
	    (jv_get_kind(denied) == JV_KIND_TRUE)) {
		err = true;
		snprintf(note, sizeof note, "[denied: %.200s]",
			 jv_get_kind(denied) == JV_KIND_STRING ? jv_string_value(denied) : "refused");
	} else if (jv_get_kind(denied) == JV_KIND_OBJECT) {
		err = true;
		snprintf(note, sizeof note, "[denied: %.200s]",
			 cave_jv_str(denied, "reason", cave_jv_str(denied, "rule", "refused")));
	} else if (jv_get_kind(sig) == JV_KIND_NUMBER || jv_get_kind(sig) == JV_KIND_STRING) {
		err = true;
		snprintf(note, sizeof note, "[killed by signal %s]",
			 jv_get_kind(sig) == JV_KIND_STRING ? jv_string_value(sig) : "");
		if (jv_get_kind(sig) == JV_KIND_NUMBER)
			snprintf(note, sizeof note, "[killed by signal %d]",
				 (int)jv_number_value(sig));
	} else if (jv_get_kind(exitv) == JV_KIND_NUMBER && jv_number_value(exitv) != 0) {
		err = true;
		snprintf(note, sizeof note, "[exit status %d]", (int)jv_number_value(exitv));
	} else if (jv_get_kind(exitv) != JV_KIND_NUMBER) {
		err = true;
		snprintf(note, sizeof note, "[the tool did not run]");
	}
	text = jv_string(out);
	if (cave_jv_bool(result, "truncated", false))
		text = jv_string_concat(text, jv_string("\n[output truncated]"));
	if (note[0])
		text = jv_string_concat(jv_string_fmt("%s%s", note, *out ? "\n" : ""), text);
	jv_free(denied);
	jv_free(exitv);
	jv_free(sig);
	return block(tool_use_id, text, err);
}

/* Canonical JSON: jq's dump with sorted keys. */
void cave_turn_signature(const char *name, jv input, char out[65])
{
	jv d = jv_dump_string(jv_copy(input), JV_PRINT_SORTED);
	struct cave_sha256 *h = cave_sha256_new();
	cave_sha256_update(h, name, strlen(name) + 1);
	cave_sha256_update(h, jv_string_value(d), (size_t)jv_string_length_bytes(jv_copy(d)));
	cave_sha256_final(h, out);
	jv_free(d);
}

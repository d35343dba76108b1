/* proto_impl.h: what the protocol files (lib/proto_*.c) share and nothing
 * outside them may use: the accumulator's layout, its content slots, and
 * small readers over borrowed jv values. Not part of libcave's API. */
#ifndef CAVE_PROTO_IMPL_H
#define CAVE_PROTO_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jv.h>

#include "buf.h"
#include "proto.h"

/* Caps on one response: bytes of all text and arguments together, and how
 * many content blocks it may have. Past them the response is malformed. */
#define CAVE_ACC_MAX_BYTES ((size_t)16 << 20)
#define CAVE_ACC_MAX_SLOTS 1024

/* Thinking budgets by reasoning level (tokens), for the protocols that take
 * a budget rather than a word. */
struct cave_reasoning_level {
	const char *name;
	int64_t anthropic_budget;
	int64_t gemini_budget;
};
/* The level named by req's "reasoning": NULL when null or absent; -1 with e
 * set when it is not a known level. */
int cave_proto_reasoning(jv req, const struct cave_reasoning_level **lvl,
			 cave_err *e);

enum acc_kind {
	SLOT_TEXT,      /* answer text */
	SLOT_TOOL,      /* a tool call; buf holds its arguments JSON */
	SLOT_THINKING,  /* Anthropic thinking, kept only to be sent back */
	SLOT_REDACTED,  /* Anthropic redacted_thinking (data in buf) */
	SLOT_SKIP       /* a block this layer does not carry (reasoning etc.) */
};

struct acc_slot {
	enum acc_kind kind;
	long key;             /* the provider's index or -1 */
	char *item;           /* the provider's item id (Responses), or NULL */
	struct cave_buf buf;  /* text, arguments JSON, or thinking text */
	char *id, *name;      /* tool call id and name */
	char *sig;            /* signature to send back (thinking, Gemini) */
	jv input;             /* parsed arguments once known, else jv_invalid */
};

struct cave_acc {
	enum cave_api api;
	struct acc_slot *slots;
	size_t nslots, capslots;
	size_t bytes;         /* text and arguments held, against the cap */
	char *response_id;
	char *provider_stop;  /* the provider's own word */
	const char *stop;     /* normalised stop reason (static), or NULL */
	jv usage_raw;         /* merged raw provider usage, or jv_null() */
	bool complete;
	bool refused;         /* a refusal part was seen (OpenAI) */
	int ncalls;           /* function calls seen (Gemini's synthetic ids) */
};

/* Slots. */
struct acc_slot *cave_acc_slot_new(struct cave_acc *acc, enum acc_kind kind,
				   long key, cave_err *e, const char *code);
/* The last slot with this key, or NULL. */
struct acc_slot *cave_acc_slot_find(struct cave_acc *acc, long key);
struct acc_slot *cave_acc_slot_item(struct cave_acc *acc, const char *item);
/* Appends to a slot's buffer against the response cap. */
int cave_acc_slot_add(struct cave_acc *acc, struct acc_slot *sl,
		      const char *p, size_t n, cave_err *e, const char *code);
/* Parses the slot's arguments (empty is {}); -1 with e set (code) when
 * they are not a JSON object. */
int cave_acc_slot_parse(struct acc_slot *sl, cave_err *e, const char *code);
/* Sets *dst to a copy of s when s is a string; consumes s. */
void cave_acc_set_str(char **dst, jv s);

/* The per-protocol halves of cave_acc_event / cave_acc_body. Each parses
 * nothing twice: obj is the parsed data (borrowed). */
int cave_anthropic_event(struct cave_acc *acc, const char *event, jv obj,
			 cave_delta_fn fn, void *ctx, cave_err *e);
int cave_anthropic_body(struct cave_acc *acc, jv obj, cave_err *e);
int cave_chat_event(struct cave_acc *acc, jv obj, cave_delta_fn fn, void *ctx,
		    cave_err *e);
int cave_chat_done(struct cave_acc *acc, cave_err *e);
int cave_chat_body(struct cave_acc *acc, jv obj, cave_err *e);
int cave_responses_event(struct cave_acc *acc, const char *event, jv obj,
			 cave_delta_fn fn, void *ctx, cave_err *e);
int cave_responses_body(struct cave_acc *acc, jv obj, cave_err *e);
int cave_gemini_event(struct cave_acc *acc, jv obj, cave_delta_fn fn,
		      void *ctx, cave_err *e);
int cave_gemini_body(struct cave_acc *acc, jv obj, cave_err *e);

int cave_anthropic_build(jv req, const char *base, struct cave_http_req *out,
			 cave_err *e);
int cave_chat_build(jv req, const char *base, struct cave_http_req *out,
		    cave_err *e);
int cave_responses_build(jv req, const char *base, struct cave_http_req *out,
			 cave_err *e);
int cave_gemini_build(jv req, const char *base, struct cave_http_req *out,
		      cave_err *e);

/* Stop reasons. */
void cave_acc_stop(struct cave_acc *acc, const char *provider_word,
		   const char *normalised);
/* A provider's stop word and the normalised reason it means. */
struct cave_stop_word {
	const char *word, *stop;
};
/* The normalised reason for word in map[0..n), "other" when not there. */
const char *cave_stop_lookup(const struct cave_stop_word *map, size_t n, const char *word);
#define CAVE_STOP_LOOKUP(map, word) cave_stop_lookup(map, sizeof map / sizeof *map, word)

/* Maps a provider error (type or status word, message) to e: "overloaded"
 * and "rate_limited" are retryable, anything else "provider_error". The
 * message is made one line. Returns -1. */
int cave_proto_fail(cave_err *e, const char *kind, const char *msg);
/* Copies s into out as one line: control characters become spaces, capped
 * (UTF-8 sequences are not cut). */
void cave_one_line(const char *s, size_t n, char *out, size_t outsz);

/* Parses n bytes of JSON (not NUL-terminated) after a strict syntax check
 * (lib/proto_json.c): jq 1.6 leaks on some malformed input. Returns
 * jv_invalid with a message when the bytes are not one JSON value. */
jv cave_json_parse(const char *p, size_t n);

/* Readers over borrowed values; none asserts on a wrong kind. */
jv pj_get(jv obj, const char *key);             /* new ref or jv_invalid */
const char *pj_str(jv obj, const char *key);    /* borrowed or NULL */
bool pj_has(jv obj, const char *key);
/* Non-negative integer field; -1 when absent or not one. */
int64_t pj_int(jv obj, const char *key);
bool pj_true(jv obj, const char *key);
jv pj_at(jv arr, int i);                        /* new ref or jv_invalid */
int pj_len(jv arr);                             /* -1 when not an array */
bool pj_is(jv v, jv_kind k);                    /* borrowed */

/* Request building helpers. */
/* base without a trailing '/', or dflt; caller frees. */
char *cave_proto_base(const char *base, const char *dflt);
/* Serialises body (consumed) into out->body. */
void cave_proto_set_body(struct cave_http_req *out, jv body);
/* Fills out: the URL is base (dflt when empty, no trailing '/') followed by
 * the formatted path; the headers content-type, extra (when not NULL) and
 * accept (an event stream or JSON); the body is body's JSON (consumed).
 * -1 with e set ("bad_request") when the URL is too long. */
int cave_proto_request(struct cave_http_req *out, const char *base, const char *dflt,
		       const char *extra, bool stream, jv body, cave_err *e,
		       const char *path_fmt, ...) __attribute__((format(printf, 8, 9)));
/* Checks model and messages; -1 with e set ("bad_request"). */
int cave_proto_check(jv req, cave_err *e);
/* A message's content (borrowed) as an array of blocks: a string becomes
 * one text block. New value. */
jv cave_proto_content_blocks(jv content);
/* The text blocks of blocks (borrowed): jv_null() when there are none, the
 * string when there is one, else an array of {type:part_type, text}. */
jv cave_proto_texts(jv blocks, const char *part_type);
/* The name of the tool whose tool_use block has this id, searching the
 * messages (borrowed) backwards from message before; NULL when none. The
 * string is borrowed from msgs. */
const char *cave_proto_tool_name(jv msgs, int before, const char *id);
/* The request's tools (borrowed req) as a protocol declares them: each
 * {head..., name, description?, schema_key: input_schema}, passed through
 * shape when it is not NULL (shape consumes and returns). A missing schema
 * becomes {"type":"object"} when schema_default, else is left out. jv_invalid
 * with e set ("bad_request") when a tool has no name. head is consumed. */
jv cave_proto_tools(jv req, jv head, const char *schema_key, bool schema_default,
		    jv (*shape)(jv decl), cave_err *e);
/* Counts of a message's blocks (borrowed) by type. */
int cave_proto_count(jv blocks, const char *type);

#endif

/* event.h: the event envelope. One compact JSON object a line, "type" and
 * "src" its first two keys, so a program can decide whether it owns a line
 * by looking at its prefix and pass the rest on without parsing them.
 * Envelope: {"type":T,"src":S,"v":1,"run":UUID,"span":16HEX,"seq":N,...}. */
#ifndef CAVE_EVENT_H
#define CAVE_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jv.h>

#include "msg.h"

/* The largest event line any program accepts, newline excluded. A longer
 * line is bad input (exit 65), never truncated. */
#define CAVE_EVENT_MAX ((size_t)64 << 20)

/* The envelope's first two keys, pointing into the line (not copies). */
struct cave_ev_head {
	const char *type;
	size_t type_len;
	const char *src; /* NULL when the line has no "src" second */
	size_t src_len;
};

/* Reads the prefix {"type":"T","src":"S" without parsing the rest.
 * Returns 0, or -1 when the line does not start like an event. */
int cave_event_peek(const char *line, size_t len, struct cave_ev_head *h);
bool cave_event_type_is(const struct cave_ev_head *h, const char *type);
bool cave_event_src_is(const struct cave_ev_head *h, const char *src);

/* Parses a whole line; returns an object or jv_invalid with e set.
 * where names the place for the message ("<stdin>:12"). */
jv cave_event_parse(const char *line, size_t len, const char *where, cave_err *e);

/* A new event object {"type":type,"src":src,"v":1}. */
jv cave_event_new(const char *type, const char *src);

/* Serialises ev (consumed) as one line with "type" and "src" first and a
 * final '\n'; caller frees. Returns NULL when ev is not an object with a
 * string type. */
char *cave_event_dump(jv ev, size_t *len);

/* Fills ev (a tool.result, consumed and returned) as the answer to req
 * (borrowed) for a tool that never ran: id, call_id and name from req, no
 * exit or signal, empty output with its digest, and denied (consumed). */
jv cave_event_tool_unrun(jv ev, jv req, jv denied);

/* Per-writer envelope state: the run and span a program writes under, and
 * its own sequence counter. */
struct cave_emitter {
	const char *src;
	char run[40];
	char span[17];
	uint64_t seq;
};
/* seq starts after CAVE_SEQ_FROM when the environment has it: a resumed
 * run's members continue past every seq its journal holds, so (src, seq)
 * stays unique in the journal. */
void cave_emitter_init(struct cave_emitter *em, const char *src);
/* Adopts run/span from an event this program answers (borrowed). */
void cave_emitter_follow(struct cave_emitter *em, jv ev);
/* Adds run, span and the next seq to ev (consumed, returned). */
jv cave_emitter_stamp(struct cave_emitter *em, jv ev);

/* Fresh identifiers from the kernel's random source. */
void cave_uuid4(char out[37]);
void cave_span_id(char out[17]);

/* Convenience readers over a borrowed object: the value or a default. */
const char *cave_jv_str(jv obj, const char *key, const char *dflt);
int64_t cave_jv_int(jv obj, const char *key, int64_t dflt);
bool cave_jv_bool(jv obj, const char *key, bool dflt);

#endif

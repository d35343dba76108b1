/* cave-run: the head of an agent run's ring. Loads the agent, starts the
 * ring (cave-budget -> cave-call -> cave-sandbox, plus --filter programs),
 * runs the turn loop (call, tools, call...), journals every event exactly
 * once, streams the answer and writes the receipt and the bill. It never
 * talks to a provider or runs a tool itself: the ring's members do; it
 * never lets a call leave before its intent is on disk. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "bill.h"
#include "catalog.h"
#include "digest.h"
#include "event.h"
#include "io.h"
#include "journal.h"
#include "json.h"
#include "msg.h"
#include "receipt.h"
#include "ring.h"
#include "turn.h"

#define SRC "cave-run"
#define MAX_FILTERS 8
#define MAX_PENDING 64
#define MAX_FRAMES 64          /* subagents running at once, at most */
#define MAX_DEPTH 8            /* the absolute cap of --max-subagent-depth */
#define UNKNOWN_TOOL "[unknown tool: the agent declares no tool of that name]"
#define DRAIN_MS 5000          /* members get this long to flush at an abort */
#define HIGH_WATER ((size_t)64 << 20)
#define STATE_MAX ((size_t)256 << 20)

static const char usage[] =
	"usage: cave run [OPTIONS] AGENT-DIR PROMPT...     (PROMPT '-' reads stdin)\n"
	"       cave run --resume RUN-ID\n"
	"Runs an agent: calls its model, runs the tools it asks for, until it\n"
	"answers without tools or a stop arrives. The answer streams to stdout,\n"
	"the bill goes to stderr, the journal and receipt to\n"
	".caveman/runs/RUN-ID/.\n"
	"  --max-usd USD            budget in USD at list prices (cave-budget)\n"
	"  --max-tokens N           budget in tokens\n"
	"  --max-retry-usd USD      what failed attempts may cost, retries\n"
	"  --max-retry-tokens N     included (needs --max-usd, --max-tokens);\n"
	"                           past it a call ends retry_budget_exhausted\n"
	"  --max-calls N            model calls at most (default 50)\n"
	"  --max-tool-calls N       tool calls at most\n"
	"  --deadline-ms N          stop between calls after this long\n"
	"  --max-fan-out N          tool calls run from one response (default 8);\n"
	"                           the rest are answered fan_out_blocked\n"
	"  --loop-window N          turns a repeated tool call is looked for in\n"
	"                           (default 8); --no-breakers turns it off\n"
	"  --no-progress-window N   stop when N turns in a row had the same\n"
	"                           outcome (default 3; a successful write resets)\n"
	"  --max-subagent-depth N   subagents below subagents (default 2, at most 8)\n"
	"  --max-subagent-invocations N  subagents started in the whole tree\n"
	"  --max-concurrent-subagents N  subagents running at once in the tree\n"
	"  --filter CMD             insert CMD (a shell command that speaks the\n"
	"                           event protocol) into the ring; repeatable\n"
	"  --events                 stdout: every event as NDJSON\n"
	"  --quiet                  no bill on stderr\n"
	"  --conversation ID        keep history under .caveman/conversations/ID\n"
	"  --resume RUN-ID          continue a run from its journal\n"
	"  --state DIR              where runs are kept (default .caveman)\n"
	"  --workspace DIR          where tools run (default the agent directory)\n"
	"  --fixtures DIR           offline corpus for fixture/ models\n"
	"  --catalog FILE           price list\n"
	"Ring order: cave-budget, --filter programs, cave-call, cave-sandbox.\n"
	"Exit: 0 done (a budget stop too), 2 usage, 65 bad data, 69 provider\n"
	"unavailable, 70 internal, 74 I/O, 77 refused (budget cost cap, a\n"
	"conversation in use), 78 bad agent or config, 128+N killed by signal N\n"
	"(141: stdout closed).\n";

struct opts {
	const char *max_usd, *max_tokens, *max_calls, *max_tool_calls, *deadline;
	const char *max_retry_usd, *max_retry_tokens; /* cave-budget's retry budget */
	const char *filters[MAX_FILTERS];
	int nfilters;
	long fan_out, loop_window, no_progress_window;
	long max_depth, max_subs, max_live; /* subagent tree limits, 0: none */
	long breakers;          /* 1 on, 0 off (-1 until set: see kept_opts) */
	jv kept;                /* a resume's options from the journal: the
				 * strings above may point into it */
	bool events, quiet;
	const char *conversation, *resume, *state, *workspace, *fixtures, *catalog;
};

struct pending {
	char id[24];           /* tool.request id, or the subagent's span */
	char *use_id;          /* the model's tool_use id */
	char *name;
	bool done;
	bool write;            /* a declared write tool */
	bool repeat_ok;        /* the tool declares allow_repeat */
	jv block;              /* the tool_result block, once done */
};

/* One agent's run in the tree: the root, or a subagent a tool call of its
 * parent started. Frames share the ring, the journal and the receipt;
 * each has its own span (its events are journaled under it), history,
 * breakers and wallet. */
struct frame {
	struct frame *parent;
	size_t slot;            /* its pending entry in the parent */
	struct cave_agent *ag;
	bool own_ag;
	char span[17];
	int depth;
	jv ancestry;            /* sandbox modes of the agents above, root first */
	jv messages;            /* the history sent with the next call */
	struct cave_buf hist;   /* its JSON, "m1,m2,..." (see history_json) */
	int hist_n;             /* messages in hist */
	jv sigs;                /* tool-call signatures per turn, for breakers */
	jv outcomes;            /* turn outcome signatures, for no_progress */
	char call_id[24];       /* the call in flight, "" when none */
	bool call_back;         /* its call.request came back round */
	bool call_printed;      /* deltas of it were seen */
	bool carving;           /* waiting for its wallet */
	bool dead;              /* ended and answered: freed at the next sweep */
	struct pending pend[MAX_PENDING];
	size_t npend;
	bool stopping, ended;
	char stop[32];          /* the reason for run.end */
	char error[64];         /* code of a failure, "" when none */
	struct cave_sha256 *final;
	struct cave_buf answer; /* the final answer */
};

struct run {
	struct opts o;
	struct cave_agent ag;
	struct cave_catalog *cat;
	struct cave_receipt *rc;
	struct cave_journal j;
	struct cave_ring ring;
	struct cave_io rin, rout, out;
	struct cave_emitter em;
	char dir[PATH_MAX];     /* .caveman/runs/<id> */
	char *members[CAVE_RING_MAX + 4]; /* src names of the ring's members */
	size_t member_at[CAVE_RING_MAX + 4]; /* their index in the ring */
	size_t nmembers;
	bool has_budget;        /* cave-budget is in the ring */

	struct frame top;       /* the root agent's run */
	struct frame *frames[MAX_FRAMES]; /* live subagents */
	size_t nframes;
	unsigned long subs_started;
	jv prior;               /* a conversation's history before this turn */
	unsigned long ncalls, ntools; /* ids, unique across the tree */

	unsigned long sent, returned; /* own events into the ring, and back */
	bool closed;
	bool end_back;          /* run.end came back: the ring is flushed */
	int exit_code;
	int sig;
	bool out_nl;            /* the last byte printed was '\n' */
	int conv_lock;
	char conv_dir[PATH_MAX];
};

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	if (!got_signal)
		got_signal = sig;
}

static long parse_num(const char *s, const char *opt, long lo, long hi)
{
	char *end;
	long v;
	errno = 0;
	v = strtol(s, &end, 10);
	if (!*s || *end || errno || v < lo || v > hi)
		cave_die(CAVE_EX_USAGE, "%s: expected a number from %ld to %ld, got '%s'",
			 opt, lo, hi, s);
	return v;
}

static void fail(struct run *r, int code, const char *what)
{
	if (!r->exit_code)
		r->exit_code = code;
	if (!r->top.error[0])
		snprintf(r->top.error, sizeof r->top.error, "%s", what);
}

/* ---- journal, stdout and the ring -------------------------------------- */

/* Journals one line (and folds it into the receipt when ev is valid;
 * borrowed). Every event the head learns of passes here exactly once. */
static void record(struct run *r, const char *line, size_t len, jv ev, bool sync)
{
	cave_err e;
	if (cave_journal_append(&r->j, line, len, &e) < 0 ||
	    (sync && cave_journal_sync(&r->j, &e) < 0)) {
		cave_warn("%s", e.msg);
		fail(r, CAVE_EX_IO, "journal");
		got_signal = got_signal ? got_signal : -1;
	}
	if (jv_is_valid(ev) && cave_receipt_fold(r->rc, ev, &e) < 0)
		cave_warn("journal line %lu: %s", r->j.lines, e.msg);
	if (r->o.events)
		cave_io_pass(&r->out, line, len);
}

/* Stamps *ev (under frame f's span; replaced by the stamped event) and
 * dumps it as one line with its '\n'; *n counts the bytes. */
static char *stamp_dump(struct run *r, struct frame *f, jv *ev, size_t *n)
{
	char *s, saved[sizeof r->em.span];
	jv env;

	memcpy(saved, r->em.span, sizeof saved);
	snprintf(r->em.span, sizeof r->em.span, "%s", f->span);
	env = cave_emitter_stamp(&r->em, cave_event_new(cave_jv_str(*ev, "type", "?"), SRC));
	memcpy(r->em.span, saved, sizeof saved);
	/* the envelope first (type, src, v, run, span, seq), then the fields */
	jv_object_foreach(*ev, k, v) {
		const char *ks = jv_string_value(k);
		if (strcmp(ks, "type") && strcmp(ks, "src") && strcmp(ks, "v"))
			env = jv_object_set(env, k, v);
		else {
			jv_free(k);
			jv_free(v);
		}
	}
	jv_free(*ev);
	*ev = env;
	s = cave_event_dump(jv_copy(env), n);
	if (!s)
		cave_die(CAVE_EX_SOFTWARE, "internal error: an event without a type");
	return s;
}

/* Journals (synced when sync) and sends one line of the head's (n bytes
 * with its '\n'; ev, the event it is, borrowed). A call's intent is on
 * disk before it leaves. */
static void send_line(struct run *r, const char *s, size_t n, jv ev, bool sync)
{
	record(r, s, n - 1, ev, sync);
	if (!r->closed) {
		cave_io_write(&r->rout, s, n);
		r->sent++;
	}
}

/* Stamps, journals and sends one event of frame f's (consumed). */
static void emit(struct run *r, struct frame *f, jv ev, bool sync)
{
	size_t n;
	char *s = stamp_dump(r, f, &ev, &n);
	send_line(r, s, n, ev, sync);
	free(s);
	jv_free(ev);
}

static bool is_member(struct run *r, const char *src, size_t len)
{
	for (size_t i = 0; i < r->nmembers; i++)
		if (strlen(r->members[i]) == len && memcmp(r->members[i], src, len) == 0)
			return true;
	return false;
}

/* The answer text of frame f: the root's goes to stdout as it comes. */
static void answer_text(struct run *r, struct frame *f, const char *s, size_t n)
{
	if (!n)
		return;
	cave_sha256_update(f->final, s, n);
	cave_buf_add(&f->answer, s, n);
	if (f != &r->top)
		return;
	if (!r->o.events)
		cave_io_write(&r->out, s, n);
	r->out_nl = s[n - 1] == '\n';
}

static void newline(struct run *r)
{
	if (!r->o.events && !r->out_nl) {
		cave_io_write(&r->out, "\n", 1);
		r->out_nl = true;
	}
}

/* ---- frames ------------------------------------------------------------- */

static void frame_init(struct frame *f, struct frame *parent, struct cave_agent *ag)
{
	memset(f, 0, sizeof *f);
	f->parent = parent;
	f->ag = ag;
	f->ancestry = jv_array();
	f->messages = jv_array();
	f->sigs = jv_array();
	f->outcomes = jv_array();
	f->final = cave_sha256_new();
	cave_buf_init(&f->answer, CAVE_EVENT_MAX / 4);
	cave_buf_init(&f->hist, CAVE_EVENT_MAX);
}

static void pending_clear(struct frame *f)
{
	for (size_t i = 0; i < f->npend; i++) {
		free(f->pend[i].use_id);
		free(f->pend[i].name);
		jv_free(f->pend[i].block);
	}
	f->npend = 0;
}

static void frame_fini(struct frame *f)
{
	char digest[CAVE_SHA256_HEX];
	pending_clear(f);
	jv_free(f->ancestry);
	jv_free(f->messages);
	jv_free(f->sigs);
	jv_free(f->outcomes);
	if (f->final)
		cave_sha256_final(f->final, digest);
	f->final = NULL;
	cave_buf_free(&f->answer);
	cave_buf_free(&f->hist);
	if (f->own_ag) {
		cave_agent_free(f->ag);
		free(f->ag);
	}
}

/* Frees the subagents that ended and were answered. */
static void sweep(struct run *r)
{
	size_t k = 0;
	for (size_t i = 0; i < r->nframes; i++) {
		if (r->frames[i]->dead) {
			frame_fini(r->frames[i]);
			free(r->frames[i]);
		} else {
			r->frames[k++] = r->frames[i];
		}
	}
	r->nframes = k;
}

/* The frame whose call or tool has id, or whose span is span. */
static struct frame *frame_of_call(struct run *r, const char *id)
{
	if (*id && strcmp(r->top.call_id, id) == 0)
		return &r->top;
	for (size_t i = 0; i < r->nframes; i++)
		if (*id && strcmp(r->frames[i]->call_id, id) == 0)
			return r->frames[i];
	return NULL;
}

static struct frame *frame_of_span(struct run *r, const char *span)
{
	for (size_t i = 0; i < r->nframes; i++)
		if (!r->frames[i]->dead && strcmp(r->frames[i]->span, span) == 0)
			return r->frames[i];
	return strcmp(span, r->top.span) == 0 ? &r->top : NULL;
}

static bool any_call(struct run *r)
{
	bool any = r->top.call_id[0] != '\0';
	for (size_t i = 0; i < r->nframes; i++)
		any = any || r->frames[i]->call_id[0];
	return any;
}

static bool any_tools(struct run *r)
{
	bool any = r->top.npend > 0;
	for (size_t i = 0; i < r->nframes; i++)
		any = any || r->frames[i]->npend > 0;
	return any;
}

/* ---- the turn loop ------------------------------------------------------ */

static void finish(struct run *r, struct frame *f, const char *reason);
static void tools_done(struct run *r, struct frame *f);

/* The JSON of f's history, dumped once: the history only grows, so a turn
 * dumps just the messages added since the last (a long history costs a
 * memcpy a turn, not a dump). -1 past the event cap. */
static int history_json(struct frame *f)
{
	int n = jv_array_length(jv_copy(f->messages));
	if (n < f->hist_n) { /* replaced, not grown: start again */
		cave_buf_reset(&f->hist);
		f->hist_n = 0;
	}
	for (; f->hist_n < n; f->hist_n++) {
		jv m = jv_array_get(jv_copy(f->messages), f->hist_n);
		int ret = (f->hist_n && cave_buf_addc(&f->hist, ',') < 0) ? -1
			  : cave_json_dump(&f->hist, m);
		jv_free(m);
		if (ret < 0)
			return -1;
	}
	return 0;
}

/* Sends f's call.request: the event is dumped with "messages":null last,
 * and the history's kept JSON goes in its place. */
static void emit_call(struct run *r, struct frame *f, jv ev)
{
	static const char tail[] = "\"messages\":null}\n";
	const size_t tl = sizeof tail - 1;
	struct cave_buf line;
	size_t n;
	char *s;

	ev = jv_object_set(ev, jv_string("messages"), jv_null());
	s = stamp_dump(r, f, &ev, &n);
	if (history_json(f) < 0 || n < tl || memcmp(s + n - tl, tail, tl) != 0)
		cave_die(CAVE_EX_DATA, "the history is larger than an event may be (%zu bytes)",
			 CAVE_EVENT_MAX);
	cave_buf_init(&line, CAVE_EVENT_MAX + 1);
	if (cave_buf_add(&line, s, n - 6) < 0 || cave_buf_addc(&line, '[') < 0 || /* - "null}\n" */
	    cave_buf_add(&line, f->hist.data ? f->hist.data : "", f->hist.len) < 0 ||
	    cave_buf_add(&line, "]}\n", 3) < 0)
		cave_die(CAVE_EX_DATA, "the history is larger than an event may be (%zu bytes)",
			 CAVE_EVENT_MAX);
	free(s);
	send_line(r, line.data, line.len, ev, true);
	cave_buf_free(&line);
	jv_free(ev);
}

static void send_call(struct run *r, struct frame *f)
{
	jv req, ev;
	if (r->sig) { /* aborted: the frame ends where it is */
		finish(r, f, NULL);
		return;
	}
	if (r->o.max_calls && r->ncalls >= (unsigned long)strtol(r->o.max_calls, NULL, 10)) {
		finish(r, f, "call_budget_exhausted");
		return;
	}
	snprintf(f->call_id, sizeof f->call_id, "c%lu", ++r->ncalls);
	f->call_back = f->call_printed = false;
	cave_buf_reset(&f->answer);
	req = cave_turn_request(f->ag, f->messages, f->call_id);
	ev = cave_event_new("call.request", SRC);
	jv_object_foreach(req, k, v) {
		if (strcmp(jv_string_value(k), "messages") != 0)
			ev = jv_object_set(ev, k, v);
		else {
			jv_free(k);
			jv_free(v);
		}
	}
	jv_free(req);
	emit_call(r, f, ev);
}

static void end_event(struct run *r, struct frame *f)
{
	char digest[CAVE_SHA256_HEX];
	jv ev = cave_event_new("run.end", SRC);
	cave_sha256_final(f->final, digest);
	f->final = NULL;
	if (f->stop[0])
		ev = jv_object_set(ev, jv_string("stop_reason"), jv_string(f->stop));
	if (f->error[0])
		ev = jv_object_set(ev, jv_string("error"), jv_string(f->error));
	if (f == &r->top && r->sig > 0)
		ev = jv_object_set(ev, jv_string("signal"), jv_number(r->sig));
	ev = jv_object_set(ev, jv_string("final_digest"), jv_string(digest));
	if (f != &r->top) /* what the parent is told: resume reads it back */
		ev = jv_object_set(ev, jv_string("output"),
				   jv_string_sized(f->answer.data ? f->answer.data : "",
						   (int)f->answer.len));
	emit(r, f, ev, true);
}

/* What a parent's tool call gets from a subagent that ended. */
static jv sub_block(const char *use_id, const char *stop, const char *error, const char *out)
{
	jv res, b;
	if (!error[0] && (!stop[0] || strcmp(stop, "complete") == 0)) {
		res = jv_object_set(jv_object(), jv_string("exit"), jv_number(0));
		res = jv_object_set(res, jv_string("output"), jv_string(out));
		b = cave_turn_result_block(use_id, res);
	} else {
		res = jv_string_fmt("[subagent stopped: %s]%s%s", error[0] ? error : stop,
				    *out ? "\n" : "", out);
		b = cave_turn_error_block(use_id, jv_string_value(res));
	}
	jv_free(res);
	return b;
}

/* A frame's run is over: run.end goes round. The root's closes the ring
 * once it is back; a subagent's answers its parent's tool call. */
static void finish(struct run *r, struct frame *f, const char *reason)
{
	struct frame *p = f->parent;
	struct pending *slot;
	if (f->ended)
		return;
	f->ended = true;
	f->carving = false;
	if (reason && !f->stop[0])
		snprintf(f->stop, sizeof f->stop, "%s", reason);
	if (f == &r->top) {
		if (f->final && f->answer.len)
			newline(r);
		end_event(r, f);
		return;
	}
	end_event(r, f);
	cave_buf_addc(&f->answer, '\0');
	f->dead = true;
	slot = &p->pend[f->slot];
	slot->block = sub_block(slot->use_id, f->stop, f->error, f->answer.data);
	slot->done = true;
	tools_done(r, p);
}

static void breaker(struct run *r, struct frame *f, const char *kind, const char *tool,
		    const char *sig)
{
	jv ev = cave_event_new("breaker", SRC);
	ev = jv_object_set(ev, jv_string("kind"), jv_string(kind));
	ev = jv_object_set(ev, jv_string("count"), jv_number(1));
	if (tool)
		ev = jv_object_set(ev, jv_string("tool"), jv_string(tool));
	if (sig)
		ev = jv_object_set(ev, jv_string("signature"), jv_string(sig));
	emit(r, f, ev, false);
}

/* True when sig was seen in the last loop_window turns. */
static bool repeated(struct run *r, struct frame *f, const char *sig)
{
	int n = jv_array_length(jv_copy(f->sigs));
	for (int i = n - 1; i >= 0 && i >= n - r->o.loop_window; i--) {
		jv turn = jv_array_get(jv_copy(f->sigs), i);
		bool hit = false;
		jv_array_foreach(turn, k, s) {
			(void)k;
			if (strcmp(jv_string_value(s), sig) == 0)
				hit = true;
			jv_free(s);
		}
		jv_free(turn);
		if (hit)
			return true;
	}
	return false;
}

/* Answers pending p with an error block of the head's own. */
static void refuse_call(struct pending *p, const char *text)
{
	p->block = cave_turn_error_block(p->use_id, text);
	p->done = true;
}

/* The tool.request for a tool call of frame f (input borrowed). */
static void tool_request(struct run *r, struct frame *f, struct pending *p,
			 const struct cave_agent_tool *t, jv input)
{
	jv ev = cave_event_new("tool.request", SRC);
	snprintf(p->id, sizeof p->id, "t%lu", ++r->ntools);
	ev = jv_object_set(ev, jv_string("id"), jv_string(p->id));
	ev = jv_object_set(ev, jv_string("call_id"), jv_string(p->use_id));
	ev = jv_object_set(ev, jv_string("name"), jv_string(p->name));
	ev = jv_object_set(ev, jv_string("input"), jv_copy(input));
	ev = jv_object_set(ev, jv_string("effect"), jv_string(t->write ? "write" : "read"));
	ev = jv_object_set(ev, jv_string("command"), jv_string(t->command));
	ev = jv_object_set(ev, jv_string("workspace"),
			   jv_string(r->o.workspace ? r->o.workspace : f->ag->dir));
	ev = jv_object_set(ev, jv_string("timeout_ms"), jv_number((double)t->timeout_ms));
	ev = jv_object_set(ev, jv_string("network"), jv_bool(t->network));
	if (t->host_loopback)
		ev = jv_object_set(ev, jv_string("host_loopback"), jv_true());
	ev = jv_object_set(ev, jv_string("sandbox"),
			   jv_string(f->ag->sandbox_host ? "host" : "required"));
	ev = jv_object_set(ev, jv_string("sandbox_ancestry"), jv_copy(f->ancestry));
	emit(r, f, ev, t->write); /* a write's intent is on disk before it runs */
}

/* The subagent's wallet: its cap in the run's denomination (the parent's
 * remainder bounds it too, in cave-budget). NULL with why set when the
 * subagent declares no cap in that denomination. */
static const char *sub_denomination(struct run *r, const struct cave_agent_tool *t, jv *amount)
{
	bool usd = r->o.max_usd || (!r->o.max_tokens && t->max_cost_pico >= 0);
	if (usd && t->max_cost_pico < 0)
		return NULL;
	if (!usd && t->max_tokens < 0)
		return NULL;
	*amount = usd ? cave_usd_jv(t->max_cost_pico) : jv_number((double)t->max_tokens);
	return usd ? "usd" : "tokens";
}

/* Starts a subagent for pending p of frame f: checks the tree's limits,
 * loads the agent, opens its run and asks cave-budget for its wallet;
 * the first call leaves when the wallet comes. A refusal answers the tool
 * call at once and takes no slot. */
static void start_sub(struct run *r, struct frame *f, struct pending *p,
		      const struct cave_agent_tool *t, jv input)
{
	struct cave_agent *ag;
	struct frame *c;
	const char *denom = NULL, *mode = f->ag->sandbox_host ? "host" : "required";
	char why[512], digest[CAVE_SHA256_HEX];
	bool under_required = !f->ag->sandbox_host;
	jv task, amount = jv_invalid(), start, opts, carve;
	cave_err e;

	why[0] = '\0';
	jv_array_foreach(f->ancestry, i, m) {
		(void)i;
		under_required = under_required || strcmp(jv_string_value(m), "required") == 0;
		jv_free(m);
	}
	if (f->depth + 1 > r->o.max_depth)
		snprintf(why, sizeof why, "[subagent refused: the depth limit (%ld) is reached]",
			 r->o.max_depth);
	else if (r->o.max_subs && r->subs_started >= (unsigned long)r->o.max_subs)
		snprintf(why, sizeof why, "[subagent refused: the run's limit of %ld subagent "
			 "invocations is reached]", r->o.max_subs);
	else if (r->o.max_live && r->nframes >= (size_t)r->o.max_live)
		snprintf(why, sizeof why, "[subagent refused: %ld subagents are running, the "
			 "most at once]", r->o.max_live);
	else if (r->nframes >= MAX_FRAMES)
		snprintf(why, sizeof why, "[subagent refused: %d subagents are running]", MAX_FRAMES);
	else if (!r->has_budget)
		snprintf(why, sizeof why, "[subagent refused: no cave-budget in the ring to "
			 "carve its wallet]");
	else if (!(denom = sub_denomination(r, t, &amount)))
		snprintf(why, sizeof why, "[subagent refused: it declares no cap in %s, the "
			 "run's budget]", r->o.max_usd ? "USD (max_cost_usd)" : "tokens (max_tokens)");
	if (why[0]) {
		jv_free(amount);
		refuse_call(p, why);
		return;
	}
	ag = cave_xcalloc(1, sizeof *ag);
	if (cave_agent_load(t->subagent_dir, ag, &e) < 0) {
		free(ag);
		jv_free(amount);
		snprintf(why, sizeof why, "[subagent refused: %.400s]", e.msg);
		refuse_call(p, why);
		return;
	}
	if (ag->sandbox_host && under_required) {
		cave_agent_free(ag);
		free(ag);
		jv_free(amount);
		refuse_call(p, "[denied: cave_host_sandbox_nested_under_required: a "
			    "host-mode subagent cannot run under a required-mode agent]");
		return;
	}
	c = cave_xcalloc(1, sizeof *c);
	frame_init(c, f, ag);
	c->own_ag = true;
	c->slot = (size_t)(p - f->pend);
	c->depth = f->depth + 1;
	cave_span_id(c->span);
	jv_free(c->ancestry);
	c->ancestry = jv_array_append(jv_copy(f->ancestry), jv_string(mode));
	snprintf(p->id, sizeof p->id, "%s", c->span);
	r->frames[r->nframes++] = c;
	r->subs_started++;

	task = jv_object_get(jv_copy(input), jv_string("task"));
	if (jv_get_kind(task) != JV_KIND_STRING) {
		jv_free(task);
		task = jv_dump_string(jv_copy(input), 0);
	}
	cave_sha256_hex(jv_string_value(task), (size_t)jv_string_length_bytes(jv_copy(task)),
			digest);
	opts = jv_object_set(jv_object(), jv_string("agent_dir"), jv_string(ag->dir));
	opts = jv_object_set(opts, jv_string("depth"), jv_number(c->depth));
	opts = jv_object_set(opts, jv_string("denomination"), jv_string(denom));
	opts = jv_object_set(opts, jv_string("wallet_at_most"), jv_copy(amount));
	start = cave_event_new("run.start", SRC);
	start = jv_object_set(start, jv_string("agent"), jv_string(ag->id));
	start = jv_object_set(start, jv_string("agent_digest"), jv_string(ag->digest));
	start = jv_object_set(start, jv_string("input_digest"), jv_string(digest));
	start = jv_object_set(start, jv_string("parent_span"), jv_string(f->span));
	start = jv_object_set(start, jv_string("call_id"), jv_string(p->use_id));
	start = jv_object_set(start, jv_string("tool"), jv_string(p->name));
	start = jv_object_set(start, jv_string("options"), opts);
	emit(r, c, start, false);
	c->messages = jv_array_append(c->messages, cave_turn_message("user", task));

	carve = cave_event_new("budget.carve", SRC);
	carve = jv_object_set(carve, jv_string("child_span"), jv_string(c->span));
	carve = jv_object_set(carve, jv_string("denomination"), jv_string(denom));
	carve = jv_object_set(carve, jv_string("at_most"), amount);
	c->carving = true;
	emit(r, f, carve, false);
}

/* cave-budget's answer to a carve: the subagent starts, or stops before
 * its first call. */
static void on_carve(struct run *r, jv ev)
{
	struct frame *c = frame_of_span(r, cave_jv_str(ev, "child_span", ""));
	const char *refused = cave_jv_str(ev, "refused", NULL);
	if (!c || !c->carving)
		return;
	c->carving = false;
	if (refused) {
		r->subs_started--; /* a refusal takes no slot */
		snprintf(c->error, sizeof c->error, "wallet_%.50s", refused);
		finish(r, c, strcmp(refused, "wallet_revoked") == 0 ? "wallet_revoked"
			 : "budget_exhausted");
		return;
	}
	send_call(r, c);
}

/* Calls tool t (NULL: one the agent does not declare) for pending p of
 * frame f: a subagent starts, a command goes to the sandbox (input
 * borrowed). */
static void call_tool(struct run *r, struct frame *f, struct pending *p,
		      const struct cave_agent_tool *t, jv input)
{
	if (!t)
		refuse_call(p, UNKNOWN_TOOL);
	else if (t->subagent_dir)
		start_sub(r, f, p, t, input);
	else
		tool_request(r, f, p, t, input);
}

/* Asks the ring for the tools a response wants (uses consumed). */
static void run_tools(struct run *r, struct frame *f, jv uses)
{
	int n = jv_array_length(jv_copy(uses));
	jv turn_sigs = jv_array();
	bool loop = false;
	char loop_tool[80] = "", loop_sig[CAVE_SHA256_HEX] = "";

	pending_clear(f);
	for (int i = 0; i < n && f->npend < MAX_PENDING; i++) {
		jv u = jv_array_get(jv_copy(uses), i);
		const char *name = cave_jv_str(u, "name", "");
		const char *use_id = cave_jv_str(u, "id", "");
		const struct cave_agent_tool *t = cave_agent_tool(f->ag, name);
		struct pending *p = &f->pend[f->npend++];
		jv input = jv_object_get(jv_copy(u), jv_string("input"));
		char sig[CAVE_SHA256_HEX];

		memset(p, 0, sizeof *p);
		p->block = jv_invalid();
		p->use_id = cave_xstrdup(use_id);
		p->name = cave_xstrdup(name);
		p->write = t && t->write;
		p->repeat_ok = t && t->allow_repeat;
		cave_turn_signature(name, input, sig);
		if (r->o.breakers && !loop && !p->repeat_ok && repeated(r, f, sig)) {
			loop = true;
			snprintf(loop_tool, sizeof loop_tool, "%.79s", name);
			snprintf(loop_sig, sizeof loop_sig, "%s", sig);
		}
		turn_sigs = jv_array_append(turn_sigs, jv_string(sig));
		if (i >= r->o.fan_out) {
			breaker(r, f, "fan_out_blocked", name, NULL);
			refuse_call(p, "[fan_out_blocked: too many tool calls in one "
				    "response; call it again later]");
		} else if (t && loop && strcmp(loop_sig, sig) == 0) {
			refuse_call(p, "[loop_detected: this call was made before; the run stops]");
		} else {
			call_tool(r, f, p, t, input);
		}
		jv_free(input);
		jv_free(u);
	}
	jv_free(uses);
	f->sigs = jv_array_append(f->sigs, turn_sigs);
	if (loop) {
		breaker(r, f, "loop_detected", loop_tool, loop_sig);
		f->stopping = true;
		snprintf(f->stop, sizeof f->stop, "loop_detected");
	}
	tools_done(r, f);
}

/* No progress: the last no_progress_window turns of f had the same
 * outcome (the tools called and what they answered, arguments aside).
 * A turn with a successful declared write is progress and clears it. */
static bool no_progress(struct run *r, struct frame *f, jv blocks)
{
	char sig[CAVE_SHA256_HEX];
	jv outcome = jv_array(), s;
	bool wrote = false, same = true;
	int n;

	for (size_t i = 0; i < f->npend; i++) {
		jv b = jv_array_get(jv_copy(blocks), (int)i);
		jv o = jv_object_set(jv_object(), jv_string("name"), jv_string(f->pend[i].name));
		o = jv_object_set(o, jv_string("content"), jv_object_get(jv_copy(b), jv_string("content")));
		o = jv_object_set(o, jv_string("is_error"), jv_object_get(jv_copy(b), jv_string("is_error")));
		wrote = wrote || (f->pend[i].write && !cave_jv_bool(b, "is_error", false));
		outcome = jv_array_append(outcome, o);
		jv_free(b);
	}
	if (wrote) {
		jv_free(outcome);
		jv_free(f->outcomes);
		f->outcomes = jv_array();
		return false;
	}
	s = jv_dump_string(outcome, JV_PRINT_SORTED);
	cave_sha256_hex(jv_string_value(s), (size_t)jv_string_length_bytes(jv_copy(s)), sig);
	jv_free(s);
	f->outcomes = jv_array_append(f->outcomes, jv_string(sig));
	n = jv_array_length(jv_copy(f->outcomes));
	if (!r->o.breakers || n < r->o.no_progress_window)
		return false;
	for (int i = n - r->o.no_progress_window; i < n; i++) {
		jv x = jv_array_get(jv_copy(f->outcomes), i);
		same = same && strcmp(jv_string_value(x), sig) == 0;
		jv_free(x);
	}
	if (same)
		breaker(r, f, "no_progress", NULL, sig);
	return same;
}

/* When every tool of the turn has answered: the results go into the
 * history and the next call leaves (unless a stop came in between). */
static void tools_done(struct run *r, struct frame *f)
{
	jv blocks = jv_array();
	for (size_t i = 0; i < f->npend; i++)
		if (!f->pend[i].done) {
			jv_free(blocks);
			return;
		}
	for (size_t i = 0; i < f->npend; i++) {
		blocks = jv_array_append(blocks, f->pend[i].block);
		f->pend[i].block = jv_invalid();
	}
	if (!f->stopping && no_progress(r, f, blocks)) {
		f->stopping = true;
		snprintf(f->stop, sizeof f->stop, "no_progress");
	}
	pending_clear(f);
	f->messages = jv_array_append(f->messages, cave_turn_message("user", blocks));
	if (f->stopping)
		finish(r, f, NULL);
	else
		send_call(r, f);
}

static void on_response(struct run *r, struct frame *f, jv ev)
{
	jv content = jv_object_get(jv_copy(ev), jv_string("content"));
	jv uses;
	if (jv_get_kind(content) != JV_KIND_ARRAY) {
		jv_free(content);
		content = jv_array();
	}
	if (!f->call_printed) { /* a response that did not stream its text */
		jv_array_foreach(content, i, b) {
			(void)i;
			if (strcmp(cave_jv_str(b, "type", ""), "text") == 0) {
				const char *t = cave_jv_str(b, "text", "");
				answer_text(r, f, t, strlen(t));
			}
			jv_free(b);
		}
	}
	f->call_id[0] = '\0';
	uses = cave_turn_tool_uses(content);
	if (jv_array_length(jv_copy(content)) > 0)
		f->messages = jv_array_append(f->messages,
					      cave_turn_message("assistant", jv_copy(content)));
	jv_free(content);
	if (jv_array_length(jv_copy(uses)) == 0 || f->stopping) {
		jv_free(uses);
		finish(r, f, f->stopping ? NULL : "complete");
		return;
	}
	if (f == &r->top && f->call_printed)
		newline(r);
	run_tools(r, f, uses);
}

static void on_stop(struct run *r, struct frame *f, jv ev)
{
	const char *why = cave_jv_str(ev, "reason", "budget_exhausted");
	const char *msg = cave_jv_str(ev, "message", NULL);
	if (f->ended)
		return;
	if (!f->stopping && !f->stop[0])
		snprintf(f->stop, sizeof f->stop, "%.31s", why);
	f->stopping = true;
	if (msg && !r->o.quiet)
		cave_warn("%s%sstop: %s: %s", f == &r->top ? "" : f->ag->id,
			  f == &r->top ? "" : ": ", why, msg);
	/* a call whose request never came back round was held by a member:
	 * it will not be answered */
	if (f->call_id[0] && !f->call_back) {
		f->call_id[0] = '\0';
		finish(r, f, NULL);
	} else if (!f->call_id[0] && f->npend == 0) {
		finish(r, f, NULL);
	}
}

static void on_call_error(struct run *r, struct frame *f, jv ev)
{
	const char *code = cave_jv_str(ev, "code", "error");
	if (!cave_jv_bool(ev, "final", true))
		return;
	f->call_id[0] = '\0';
	cave_warn("%s%scall failed: %s: %s", f == &r->top ? "" : f->ag->id,
		  f == &r->top ? "" : ": ", code, cave_jv_str(ev, "message", ""));
	if (f != &r->top)
		snprintf(f->error, sizeof f->error, "%.63s", code);
	else if (strcmp(code, "no_api_key") == 0)
		fail(r, CAVE_EX_CONFIG, code);
	else if (strncmp(code, "cave_run_cost", 13) == 0)
		fail(r, CAVE_EX_POLICY, code);
	else if (strncmp(code, "malformed", 9) == 0 || strcmp(code, "bad_request") == 0)
		fail(r, CAVE_EX_DATA, code);
	else if (strcmp(code, "aborted") == 0)
		fail(r, CAVE_EX_SOFTWARE, code);
	else
		fail(r, CAVE_EX_UNAVAILABLE, code);
	finish(r, f, NULL);
}

static bool tool_result_in(struct run *r, struct frame *f, jv ev)
{
	const char *id = cave_jv_str(ev, "id", "");
	for (size_t i = 0; i < f->npend; i++) {
		struct pending *p = &f->pend[i];
		if (p->done || strcmp(p->id, id) != 0)
			continue;
		p->block = cave_turn_result_block(p->use_id, ev);
		p->done = true;
		tools_done(r, f);
		return true;
	}
	return false;
}

static void on_tool_result(struct run *r, jv ev)
{
	if (tool_result_in(r, &r->top, ev))
		return;
	for (size_t i = 0; i < r->nframes; i++)
		if (!r->frames[i]->dead && tool_result_in(r, r->frames[i], ev))
			return;
}

/* Acts on an event from another member (borrowed). */
static void act(struct run *r, const struct cave_ev_head *h, jv ev)
{
	const char *id = cave_jv_str(ev, "id", "");
	struct frame *f;
	if (r->top.ended)
		return;
	if (cave_event_type_is(h, "call.delta")) {
		if ((f = frame_of_call(r, id))) {
			const char *t = cave_jv_str(ev, "text", "");
			answer_text(r, f, t, strlen(t));
			f->call_printed = true;
		}
	} else if (cave_event_type_is(h, "call.response")) {
		if ((f = frame_of_call(r, id)))
			on_response(r, f, ev);
	} else if (cave_event_type_is(h, "call.error")) {
		if ((f = frame_of_call(r, id)))
			on_call_error(r, f, ev);
	} else if (cave_event_type_is(h, "tool.result")) {
		on_tool_result(r, ev);
	} else if (cave_event_type_is(h, "run.stop")) {
		f = frame_of_span(r, cave_jv_str(ev, "span", ""));
		on_stop(r, f ? f : &r->top, ev);
	} else if (cave_event_type_is(h, "budget.carve")) {
		on_carve(r, ev);
	}
	sweep(r);
}

static bool acts_on(const struct cave_ev_head *h)
{
	return cave_event_type_is(h, "call.delta") || cave_event_type_is(h, "call.response") ||
	       cave_event_type_is(h, "call.error") || cave_event_type_is(h, "tool.result") ||
	       cave_event_type_is(h, "run.stop") || cave_event_type_is(h, "budget.carve");
}

/* The span of one of the head's own events, back from its lap: emit()
 * writes the envelope in a fixed order (type, src, v, run, span, seq), so
 * it is read from the prefix without parsing a megabyte of history. */
static bool own_span(const char *line, size_t len, char out[17])
{
	const char *k = memmem(line, len < 256 ? len : 256, "\"span\":\"", 8);
	if (!k || (size_t)(k - line) + 8 + 17 > len || k[8 + 16] != '"')
		return false;
	memcpy(out, k + 8, 16);
	out[16] = '\0';
	return true;
}

static int on_ring_line(void *ctx, char *line, size_t len)
{
	struct run *r = ctx;
	struct cave_ev_head h;
	char where[64];
	cave_err e;
	jv ev = jv_invalid();
	bool known, peeked = cave_event_peek(line, len, &h) == 0;

	if (!peeked)
		memset(&h, 0, sizeof h);
	if (h.src && cave_event_src_is(&h, SRC)) {
		/* our own event, back from its lap: already journaled */
		char span[17];
		struct frame *f;
		r->returned++;
		if (!own_span(line, len, span))
			return 0;
		f = frame_of_span(r, span);
		if (cave_event_type_is(&h, "call.request") && f)
			f->call_back = true; /* a frame has one call out at a time */
		else if (cave_event_type_is(&h, "run.end") && f == &r->top)
			r->end_back = true;
		return 0;
	}
	known = h.src && is_member(r, h.src, h.src_len);
	if (!peeked || !h.src ||
	    cave_receipt_wants(h.type, h.type_len) || (known && acts_on(&h))) {
		snprintf(where, sizeof where, "ring:%lu", r->rin.lineno);
		ev = cave_event_parse(line, len, where, &e);
		if (!jv_is_valid(ev)) {
			cave_warn("%s", e.msg);
			jv_free(ev);
			ev = jv_invalid();
		}
	}
	/* not synced: the next thing with an effect outside (a call, a write
	 * tool, the end) syncs first, and fdatasync takes every line before */
	record(r, line, len, ev, false);
	if (known) {
		/* on round, so that it reaches its writer again */
		if (!r->closed)
			cave_io_pass(&r->rout, line, len);
		if (jv_is_valid(ev))
			act(r, &h, ev);
	}
	jv_free(ev);
	return 0;
}

/* ---- set-up ------------------------------------------------------------- */

static void add_member(struct run *r, const char *name)
{
	r->member_at[r->nmembers] = r->ring.n - 1;
	r->members[r->nmembers++] = cave_xstrdup(name);
}

/* Appends "flag value" to argv when value is set; returns the new count. */
static int flag_arg(const char **argv, int n, const char *flag, const char *value)
{
	if (value) {
		argv[n++] = flag;
		argv[n++] = value;
	}
	return n;
}

static void build_ring(struct run *r)
{
	char path[PATH_MAX], restore_bytes[32];
	cave_err e;
	const char *argv[24];
	int n = 0;

	cave_ring_init(&r->ring);
	if (cave_ring_find("cave-budget", path, sizeof path) < 0) {
		if (r->o.max_usd || r->o.max_tokens || r->o.max_tool_calls || r->o.deadline)
			cave_die(CAVE_EX_CONFIG, "cannot find cave-budget, which the budget options need");
	} else {
		argv[n++] = path;
		n = flag_arg(argv, n, "--max-usd", r->o.max_usd);
		n = flag_arg(argv, n, "--max-tokens", r->o.max_tokens);
		n = flag_arg(argv, n, "--max-retry-usd", r->o.max_retry_usd);
		n = flag_arg(argv, n, "--max-retry-tokens", r->o.max_retry_tokens);
		n = flag_arg(argv, n, "--max-model-calls", r->o.max_calls);
		n = flag_arg(argv, n, "--max-tool-calls", r->o.max_tool_calls);
		n = flag_arg(argv, n, "--deadline-ms", r->o.deadline);
		n = flag_arg(argv, n, "--catalog", r->o.catalog);
		if (r->o.resume) {
			/* the ledger as the journal left it; only the bytes there
			 * now, since the run appends to it while cave-budget reads */
			struct stat st;
			if (fstat(r->j.fd, &st) < 0)
				cave_die(CAVE_EX_IO, "cannot stat '%s':", r->j.path);
			snprintf(restore_bytes, sizeof restore_bytes, "%lld", (long long)st.st_size);
			argv[n++] = "--restore";
			argv[n++] = r->j.path;
			argv[n++] = "--restore-bytes";
			argv[n++] = restore_bytes;
		}
		argv[n] = NULL;
		if (cave_ring_add(&r->ring, argv, &e) < 0)
			cave_die(CAVE_EX_SOFTWARE, "%s", e.msg);
		add_member(r, "cave-budget");
		r->has_budget = true;
	}
	for (int i = 0; i < r->o.nfilters; i++)
		if (cave_ring_add_shell(&r->ring, r->o.filters[i], &e) < 0)
			cave_die(CAVE_EX_USAGE, "%s", e.msg);
	if (cave_ring_find("cave-call", path, sizeof path) < 0)
		cave_die(CAVE_EX_CONFIG, "cannot find cave-call");
	n = 0;
	argv[n++] = path;
	n = flag_arg(argv, n, "--fixtures", r->o.fixtures);
	argv[n] = NULL;
	if (cave_ring_add(&r->ring, argv, &e) < 0)
		cave_die(CAVE_EX_SOFTWARE, "%s", e.msg);
	add_member(r, "cave-call");
	if (cave_ring_find("cave-sandbox", path, sizeof path) < 0) {
		if (r->ag.ntools)
			cave_die(CAVE_EX_CONFIG, "cannot find cave-sandbox, which the agent's tools need");
	} else {
		argv[0] = path;
		argv[1] = NULL;
		if (cave_ring_add(&r->ring, argv, &e) < 0)
			cave_die(CAVE_EX_SOFTWARE, "%s", e.msg);
		add_member(r, "cave-sandbox");
	}
	if (cave_ring_start(&r->ring, &e) < 0)
		cave_die(CAVE_EX_SOFTWARE, "%s", e.msg);
}

/* ---- conversations ------------------------------------------------------ */

static jv read_json_file(const char *path)
{
	struct cave_buf b;
	jv v;
	cave_buf_init(&b, STATE_MAX);
	if (cave_buf_read_file(&b, path) < 0) {
		v = errno == ENOBUFS ? jv_invalid_with_msg(jv_string("too large")) : jv_invalid();
		cave_buf_free(&b);
		return v;
	}
	v = jv_parse_sized(b.data ? b.data : "", (int)b.len);
	cave_buf_free(&b);
	return v;
}

/* Writes v (consumed) to path atomically: temp file, fsync, rename. */
static int write_json_file(const char *path, jv v)
{
	char tmp[PATH_MAX + 16];
	jv s = jv_dump_string(v, 0);
	int fd, ret = -1;
	size_t len = (size_t)jv_string_length_bytes(jv_copy(s)), off = 0;
	const char *p = jv_string_value(s);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		goto out;
	while (off < len) {
		ssize_t w = write(fd, p + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			close(fd);
			goto out;
		}
		off += (size_t)w;
	}
	if (write(fd, "\n", 1) != 1 || fsync(fd) < 0) {
		close(fd);
		goto out;
	}
	close(fd);
	if (rename(tmp, path) < 0)
		goto out;
	ret = 0;
out:
	jv_free(s);
	return ret;
}

static bool valid_id(const char *s)
{
	size_t n = strlen(s);
	if (!n || n > 128 || s[0] == '.')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

/* Takes the conversation's lock (fails closed when another run holds it)
 * and loads its history; rotates the cache epoch on a change of agent
 * definition or model. Returns the epoch. */
static long conv_open(struct run *r, jv *meta_out)
{
	char path[PATH_MAX + 32];
	cave_err e;
	jv meta, hist;
	long epoch = 1;

	if (!valid_id(r->o.conversation))
		cave_die(CAVE_EX_USAGE, "--conversation: '%s' is not 1-128 of [A-Za-z0-9._-]",
			 r->o.conversation);
	snprintf(r->conv_dir, sizeof r->conv_dir, "%s/conversations/%s", r->o.state,
		 r->o.conversation);
	if (cave_mkdirs(r->conv_dir, &e) < 0)
		cave_die(CAVE_EX_IO, "%s", e.msg);
	snprintf(path, sizeof path, "%s/lock", r->conv_dir);
	r->conv_lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (r->conv_lock < 0)
		cave_die(CAVE_EX_IO, "cannot open '%s':", path);
	if (flock(r->conv_lock, LOCK_EX | LOCK_NB) < 0)
		cave_die(CAVE_EX_POLICY, "conversation '%s' is in use by another run",
			 r->o.conversation);
	snprintf(path, sizeof path, "%s/history.json", r->conv_dir);
	hist = read_json_file(path);
	if (jv_get_kind(hist) == JV_KIND_INVALID && access(path, F_OK) == 0)
		cave_die(CAVE_EX_DATA, "'%s': not JSON", path);
	if (jv_get_kind(hist) != JV_KIND_ARRAY) {
		jv_free(hist);
		hist = jv_array();
	}
	snprintf(path, sizeof path, "%s/meta.json", r->conv_dir);
	meta = read_json_file(path);
	if (jv_get_kind(meta) == JV_KIND_OBJECT) {
		epoch = (long)cave_jv_int(meta, "epoch", 1);
		if (strcmp(cave_jv_str(meta, "agent_digest", ""), r->ag.digest) != 0 ||
		    strcmp(cave_jv_str(meta, "model", ""), r->ag.model_id) != 0) {
			epoch++;
			if (!r->o.quiet)
				cave_warn("conversation '%s': the agent definition or model changed; "
					  "cache epoch %ld", r->o.conversation, epoch);
		}
	}
	jv_free(meta);
	meta = jv_object();
	meta = jv_object_set(meta, jv_string("agent"), jv_string(r->ag.id));
	meta = jv_object_set(meta, jv_string("agent_digest"), jv_string(r->ag.digest));
	meta = jv_object_set(meta, jv_string("model"), jv_string(r->ag.model_id));
	meta = jv_object_set(meta, jv_string("epoch"), jv_number((double)epoch));
	*meta_out = meta;
	jv_free(r->prior);
	r->prior = jv_copy(hist);
	jv_free(r->top.messages);
	r->top.messages = hist;
	return epoch;
}

/* A turn that ended well commits the history; any other leaves it as it
 * was before the turn. */
static void conv_close(struct run *r, jv meta, bool commit)
{
	char path[PATH_MAX + 32];
	if (commit) {
		snprintf(path, sizeof path, "%s/history.json", r->conv_dir);
		if (write_json_file(path, jv_copy(r->top.messages)) < 0) {
			cave_warn("cannot write '%s':", path);
			fail(r, CAVE_EX_IO, "conversation");
		}
		meta = jv_object_set(meta, jv_string("last_run"), jv_string(r->em.run));
		snprintf(path, sizeof path, "%s/meta.json", r->conv_dir);
		if (write_json_file(path, jv_copy(meta)) < 0) {
			cave_warn("cannot write '%s':", path);
			fail(r, CAVE_EX_IO, "conversation");
		}
	} else if (!r->o.quiet) {
		cave_warn("conversation '%s': the turn failed; history left as it was",
			  r->o.conversation);
	}
	jv_free(meta);
	close(r->conv_lock);
	r->conv_lock = -1;
}

/* ---- the loop ----------------------------------------------------------- */

static size_t queued(const struct cave_io *io)
{
	return io->out.len - io->out_off;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* Closes the head's end into the ring: members see their input end,
 * finish and exit, and the ring's output ends after them. */
static void close_ring(struct run *r)
{
	if (r->closed)
		return;
	r->closed = true;
	close(r->rout.out_fd);
	r->rout.out_fd = -1;
	r->rout.out_closed = true;
	r->ring.to_ring = -1;
}

static int loop(struct run *r, const sigset_t *unblocked)
{
	double abort_at = 0;
	bool killed = false;
	cave_err e;
	for (;;) {
		struct pollfd p[6];
		int n = 0, nin, nrout, nout;
		struct timespec ts = { 0, 200 * 1000 * 1000 };

		if (got_signal && !r->sig) {
			r->sig = got_signal;
			/* The members doing work (a call in flight, tools running)
			 * are told to stop: each ends its work with an error or a
			 * result, which comes round and goes on to cave-budget, so
			 * what was spent is settled; no new call leaves (send_call)
			 * and the frames finish. The ring closes once the root's
			 * run.end is back, or at once when nothing was running. A
			 * ring that lingers is closed, then told, then killed. */
			for (size_t i = 0; i < r->nmembers; i++)
				if ((any_call(r) && strcmp(r->members[i], "cave-call") == 0) ||
				    (any_tools(r) && strcmp(r->members[i], "cave-sandbox") == 0))
					cave_ring_signal_one(&r->ring, r->member_at[i], SIGTERM);
			if (!any_call(r) && !any_tools(r))
				close_ring(r);
			abort_at = now_ms() + DRAIN_MS;
		}
		if (r->out.out_closed && !r->sig) {
			got_signal = SIGPIPE;
			continue;
		}
		if (abort_at && now_ms() > abort_at) {
			cave_warn("the ring did not finish in %d ms; %s", DRAIN_MS,
				  killed ? "killing it" : "stopping it");
			close_ring(r);
			cave_ring_signal(&r->ring, killed ? SIGKILL : SIGTERM);
			killed = true;
			abort_at = now_ms() + DRAIN_MS;
		}
		if (r->top.ended && !r->closed && r->end_back && !queued(&r->rout))
			close_ring(r);
		if (r->rin.in_eof)
			break;
		r->rin.paused = queued(&r->rout) > HIGH_WATER || queued(&r->out) > HIGH_WATER;
		nin = cave_io_pollfds(&r->rin, p + n);
		n += nin;
		nrout = r->closed ? 0 : cave_io_pollfds(&r->rout, p + n);
		n += nrout;
		nout = cave_io_pollfds(&r->out, p + n);
		n += nout;
		if (ppoll(p, (nfds_t)n, &ts, unblocked) < 0) {
			if (errno == EINTR)
				continue;
			return cave_errf(&e, "io", "poll failed: %s", strerror(errno));
		}
		if (cave_io_service(&r->rin, p, nin, on_ring_line, r, &e) < 0) {
			cave_warn("%s", e.msg);
			fail(r, CAVE_EX_DATA, "ring");
			return -1;
		}
		if (nrout)
			cave_io_service(&r->rout, p + nin, nrout, NULL, NULL, &e);
		if (nout)
			cave_io_service(&r->out, p + nin + nrout, nout, NULL, NULL, &e);
		if (r->rout.out_closed && !r->closed) {
			/* the first member went away */
			r->closed = true;
		}
	}
	return 0;
}

static void parse_opts(struct run *r, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "max-usd", required_argument, NULL, 1 },
		{ "max-tokens", required_argument, NULL, 2 },
		{ "max-calls", required_argument, NULL, 3 },
		{ "max-tool-calls", required_argument, NULL, 4 },
		{ "deadline-ms", required_argument, NULL, 5 },
		{ "max-fan-out", required_argument, NULL, 6 },
		{ "loop-window", required_argument, NULL, 7 },
		{ "no-breakers", no_argument, NULL, 8 },
		{ "filter", required_argument, NULL, 9 },
		{ "events", no_argument, NULL, 10 },
		{ "quiet", no_argument, NULL, 11 },
		{ "conversation", required_argument, NULL, 12 },
		{ "resume", required_argument, NULL, 13 },
		{ "state", required_argument, NULL, 14 },
		{ "workspace", required_argument, NULL, 15 },
		{ "fixtures", required_argument, NULL, 16 },
		{ "catalog", required_argument, NULL, 17 },
		{ "no-progress-window", required_argument, NULL, 18 },
		{ "max-subagent-depth", required_argument, NULL, 19 },
		{ "max-subagent-invocations", required_argument, NULL, 20 },
		{ "max-concurrent-subagents", required_argument, NULL, 21 },
		{ "max-retry-usd", required_argument, NULL, 22 },
		{ "max-retry-tokens", required_argument, NULL, 23 },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int c;
	r->o.fan_out = r->o.loop_window = r->o.no_progress_window = -1;
	r->o.max_depth = r->o.max_subs = r->o.max_live = r->o.breakers = -1;
	r->o.state = ".caveman";
	r->o.kept = jv_null();
	while ((c = getopt_long(argc, argv, "+hq", lo, NULL)) != -1) {
		switch (c) {
		case 1: r->o.max_usd = optarg; break;
		case 2: r->o.max_tokens = optarg; break;
		case 3: parse_num(optarg, "--max-calls", 1, 1000000); r->o.max_calls = optarg; break;
		case 4: parse_num(optarg, "--max-tool-calls", 0, 1000000); r->o.max_tool_calls = optarg; break;
		case 5: parse_num(optarg, "--deadline-ms", 1, 86400000L * 30); r->o.deadline = optarg; break;
		case 6: r->o.fan_out = parse_num(optarg, "--max-fan-out", 1, MAX_PENDING); break;
		case 7: r->o.loop_window = parse_num(optarg, "--loop-window", 1, 1000); break;
		case 8: r->o.breakers = 0; break;
		case 9:
			if (r->o.nfilters >= MAX_FILTERS)
				cave_die(CAVE_EX_USAGE, "--filter: at most %d", MAX_FILTERS);
			r->o.filters[r->o.nfilters++] = optarg;
			break;
		case 10: r->o.events = true; break;
		case 'q':
		case 11: r->o.quiet = true; break;
		case 12: r->o.conversation = optarg; break;
		case 13: r->o.resume = optarg; break;
		case 14: r->o.state = optarg; break;
		case 15: r->o.workspace = optarg; break;
		case 16: r->o.fixtures = optarg; break;
		case 17: r->o.catalog = optarg; break;
		case 18: r->o.no_progress_window = parse_num(optarg, "--no-progress-window", 2, 1000); break;
		case 19: r->o.max_depth = parse_num(optarg, "--max-subagent-depth", 0, MAX_DEPTH); break;
		case 20: r->o.max_subs = parse_num(optarg, "--max-subagent-invocations", 1, 1000000); break;
		case 21: r->o.max_live = parse_num(optarg, "--max-concurrent-subagents", 1, MAX_FRAMES); break;
		case 22: r->o.max_retry_usd = optarg; break;
		case 23: r->o.max_retry_tokens = optarg; break;
		case 'h': fputs(usage, stdout); exit(cave_close_stdout());
		default: fputs(usage, stderr); exit(CAVE_EX_USAGE);
		}
	}
	if (r->o.max_usd && r->o.max_tokens)
		cave_die(CAVE_EX_USAGE, "--max-usd and --max-tokens do not go together");
	/* the amount itself cave-budget checks, in the budget's denomination */
	if ((r->o.max_retry_usd && !r->o.max_usd) || (r->o.max_retry_tokens && !r->o.max_tokens))
		cave_die(CAVE_EX_USAGE, "%s needs %s", r->o.max_retry_usd ? "--max-retry-usd"
			 : "--max-retry-tokens", r->o.max_retry_usd ? "--max-usd" : "--max-tokens");
}

/* The options a run keeps in its run.start, so that a resume runs as the
 * run began: a string or a number (-1 until set) and its default. */
struct kept {
	const char *name;
	const char **s;
	long *n;
	const char *s_dflt;
	long n_dflt;
};

static size_t kept_opts(struct opts *o, struct kept *k)
{
	const struct kept t[] = {
		{ "max_usd", &o->max_usd, NULL, NULL, 0 },
		{ "max_tokens", &o->max_tokens, NULL, NULL, 0 },
		{ "max_retry_usd", &o->max_retry_usd, NULL, NULL, 0 },
		{ "max_retry_tokens", &o->max_retry_tokens, NULL, NULL, 0 },
		{ "max_calls", &o->max_calls, NULL, "50", 0 },
		{ "max_tool_calls", &o->max_tool_calls, NULL, NULL, 0 },
		{ "deadline_ms", &o->deadline, NULL, NULL, 0 },
		{ "workspace", &o->workspace, NULL, NULL, 0 },
		{ "fixtures", &o->fixtures, NULL, NULL, 0 },
		{ "catalog", &o->catalog, NULL, NULL, 0 },
		{ "max_fan_out", NULL, &o->fan_out, NULL, 8 },
		{ "loop_window", NULL, &o->loop_window, NULL, 8 },
		{ "no_progress_window", NULL, &o->no_progress_window, NULL, 3 },
		{ "breakers", NULL, &o->breakers, NULL, 1 },
		{ "max_subagent_depth", NULL, &o->max_depth, NULL, 2 },
		{ "max_subagent_invocations", NULL, &o->max_subs, NULL, 0 },
		{ "max_concurrent_subagents", NULL, &o->max_live, NULL, 0 },
	};
	memcpy(k, t, sizeof t);
	return sizeof t / sizeof t[0];
}

/* Unset options take their defaults. */
static void opts_defaults(struct opts *o)
{
	struct kept k[24];
	for (size_t i = 0, n = kept_opts(o, k); i < n; i++) {
		if (k[i].s && !*k[i].s)
			*k[i].s = k[i].s_dflt;
		if (k[i].n && *k[i].n < 0)
			*k[i].n = k[i].n_dflt;
	}
}

/* The options as run.start keeps them (after opts_defaults). */
static jv opts_jv(struct opts *o, jv out)
{
	struct kept k[24];
	for (size_t i = 0, n = kept_opts(o, k); i < n; i++) {
		if (k[i].s && *k[i].s)
			out = jv_object_set(out, jv_string(k[i].name), jv_string(*k[i].s));
		else if (k[i].n)
			out = jv_object_set(out, jv_string(k[i].name), jv_number((double)*k[i].n));
	}
	return out;
}

/* A resume takes the options the run began with, except those given again
 * on its command line (kept borrowed). */
static void opts_resume(struct opts *o, jv kept)
{
	struct kept k[24];
	jv_free(o->kept);
	o->kept = jv_copy(kept);
	kept = o->kept;
	for (size_t i = 0, n = kept_opts(o, k); i < n; i++) {
		jv v = jv_object_get(jv_copy(kept), jv_string(k[i].name));
		if (k[i].s && !*k[i].s && jv_get_kind(v) == JV_KIND_STRING)
			*k[i].s = jv_string_value(v); /* lives in o->kept */
		else if (k[i].n && *k[i].n < 0 && jv_get_kind(v) == JV_KIND_NUMBER)
			*k[i].n = (long)jv_number_value(v);
		jv_free(v);
	}
}

/* ---- the end: receipt, bill, sidecar ------------------------------------ */

static int finish_run(struct run *r)
{
	char path[PATH_MAX + 32];
	struct cave_buf bill;
	unsigned long unknown = cave_receipt_unknown_calls(r->rc);
	cave_err e;
	jv rj;
	int rc = r->exit_code;

	if (cave_journal_sync(&r->j, &e) < 0) {
		cave_warn("%s", e.msg);
		rc = rc ? rc : CAVE_EX_IO;
	}
	rj = cave_receipt_jv(r->rc);
	snprintf(path, sizeof path, "%s/receipt.json", r->dir);
	if (cave_receipt_write(path, rj, &e) < 0) {
		cave_warn("%s", e.msg);
		rc = rc ? rc : CAVE_EX_IO;
	}
	if (unknown)
		cave_warn("%lu model call%s in flight when the run ended: outcome unknown, "
			  "may have been billed, not in the receipt", unknown,
			  unknown == 1 ? "" : "s");
	if (!r->o.quiet) {
		cave_buf_init(&bill, (size_t)16 << 20);
		if (cave_bill_format(rj, unknown, &bill) == 0) {
			fflush(stdout);
			fputs(bill.data ? bill.data : "", stderr);
		}
		cave_buf_free(&bill);
		fprintf(stderr, "%s: run %s: %s/\n", SRC, r->em.run, r->dir);
	}
	jv_free(rj);
	if (cave_io_drain(&r->out) < 0 && !r->out.out_closed && !rc)
		rc = CAVE_EX_IO;
	cave_journal_close(&r->j);
	return rc;
}

/* ---- resume ------------------------------------------------------------- */

struct rs {
	struct run *r;
	jv start;          /* the run.start of the head */
	jv last_req;       /* the last call.request of the head */
	jv outcome;        /* its call.response or final call.error, or null */
	jv treqs;          /* tool.requests after it */
	jv tres;           /* tool.result by id (object) */
	jv budget;         /* the root wallet's last budget.state */
	jv prior_resume;   /* resume.json of an earlier resume, or null */
	jv subs;           /* subagents by the tool_use id that started them:
			    * {"start": run.start, "end": run.end or absent} */
	bool ended;
	uint64_t seq;      /* the head's last seq */
	uint64_t seq_all;  /* the last seq of any writer */
	unsigned long maxc, maxt;
};

static unsigned long num_after(const char *id, char c)
{
	char *end;
	unsigned long v;
	if (!id || id[0] != c)
		return 0;
	v = strtoul(id + 1, &end, 10);
	return *end ? 0 : v;
}

static int resume_line(void *ctx, char *line, size_t len, unsigned long lineno)
{
	struct rs *s = ctx;
	char where[64];
	cave_err e;
	const char *type, *src, *id;
	jv ev;
	snprintf(where, sizeof where, "events.ndjson:%lu", lineno);
	ev = cave_event_parse(line, len, where, &e);
	if (!jv_is_valid(ev)) {
		cave_warn("%s", e.msg);
		jv_free(ev);
		return 0;
	}
	if (cave_receipt_fold(s->r->rc, ev, &e) < 0)
		cave_warn("%s: %s", where, e.msg);
	type = cave_jv_str(ev, "type", "");
	src = cave_jv_str(ev, "src", "");
	id = cave_jv_str(ev, "id", "");
	if (strcmp(src, SRC) == 0 && (uint64_t)cave_jv_int(ev, "seq", 0) > s->seq)
		s->seq = (uint64_t)cave_jv_int(ev, "seq", 0);
	if ((uint64_t)cave_jv_int(ev, "seq", 0) > s->seq_all)
		s->seq_all = (uint64_t)cave_jv_int(ev, "seq", 0);
	if (strcmp(src, SRC) == 0 && jv_get_kind(s->start) == JV_KIND_OBJECT &&
	    strcmp(cave_jv_str(ev, "span", ""), cave_jv_str(s->start, "span", "")) != 0) {
		/* a subagent's: its start and end tell resume what it answered;
		 * its ids still count, so new ones do not collide */
		const char *sp = cave_jv_str(ev, "span", "");
		if (strcmp(type, "run.start") == 0 && cave_jv_str(ev, "call_id", NULL)) {
			jv e1 = jv_object_set(jv_object(), jv_string("start"), jv_copy(ev));
			s->subs = jv_object_set(s->subs, jv_string(cave_jv_str(ev, "call_id", "")), e1);
		} else if (strcmp(type, "run.end") == 0) {
			jv subs = jv_copy(s->subs); /* iterated while s->subs changes */
			jv_object_foreach(subs, k, v) {
				jv st = jv_object_get(jv_copy(v), jv_string("start"));
				if (strcmp(cave_jv_str(st, "span", ""), sp) == 0)
					s->subs = jv_object_set(s->subs, jv_copy(k),
								jv_object_set(jv_copy(v), jv_string("end"),
									      jv_copy(ev)));
				jv_free(st);
				jv_free(k);
				jv_free(v);
			}
			jv_free(subs);
		}
		if (num_after(id, 'c') > s->maxc)
			s->maxc = num_after(id, 'c');
		if (num_after(id, 't') > s->maxt)
			s->maxt = num_after(id, 't');
	} else if (strcmp(src, SRC) == 0) {
		if (strcmp(type, "run.start") == 0 && jv_get_kind(s->start) == JV_KIND_NULL) {
			s->start = jv_copy(ev);
		} else if (strcmp(type, "call.request") == 0) {
			jv_free(s->last_req);
			s->last_req = jv_copy(ev);
			jv_free(s->outcome);
			s->outcome = jv_null();
			jv_free(s->treqs);
			s->treqs = jv_array();
			if (num_after(id, 'c') > s->maxc)
				s->maxc = num_after(id, 'c');
		} else if (strcmp(type, "tool.request") == 0) {
			s->treqs = jv_array_append(s->treqs, jv_copy(ev));
			if (num_after(id, 't') > s->maxt)
				s->maxt = num_after(id, 't');
		} else if (strcmp(type, "run.end") == 0) {
			s->ended = true;
		}
	}
	if ((strcmp(type, "call.response") == 0 ||
	     (strcmp(type, "call.error") == 0 && cave_jv_bool(ev, "final", true))) &&
	    jv_get_kind(s->last_req) == JV_KIND_OBJECT &&
	    strcmp(id, cave_jv_str(s->last_req, "id", "")) == 0) {
		jv_free(s->outcome);
		s->outcome = jv_copy(ev);
	} else if (strcmp(type, "tool.result") == 0 && *id) {
		s->tres = jv_object_set(s->tres, jv_string(id), jv_copy(ev));
	} else if (strcmp(type, "budget.state") == 0 && jv_get_kind(s->start) == JV_KIND_OBJECT &&
		   strcmp(cave_jv_str(ev, "span", ""), cave_jv_str(s->start, "span", "")) == 0) {
		/* the root wallet's (a subagent's wallet has its own span) */
		jv_free(s->budget);
		s->budget = jv_copy(ev);
	}
	jv_free(ev);
	return 0;
}

static struct rs rs_state;

/* Reads the run's journal: agent, options, spend and the last boundary. */
static void resume_load(struct run *r)
{
	struct rs *s = &rs_state;
	char path[PATH_MAX + 64];
	cave_err e;
	jv opts;
	const char *dir;

	if (!valid_id(r->o.resume))
		cave_die(CAVE_EX_USAGE, "--resume: '%s' is not a run id", r->o.resume);
	memset(s, 0, sizeof *s);
	s->r = r;
	s->start = s->last_req = s->outcome = s->budget = s->prior_resume = jv_null();
	s->treqs = jv_array();
	s->tres = jv_object();
	s->subs = jv_object();
	r->cat = cave_catalog_load(r->o.catalog, &e);
	r->rc = cave_receipt_new(r->cat);
	snprintf(r->dir, sizeof r->dir, "%s/runs/%s", r->o.state, r->o.resume);
	snprintf(path, sizeof path, "%s/events.ndjson", r->dir);
	if (access(path, R_OK) < 0)
		cave_die(CAVE_EX_USAGE, "--resume: no journal for run '%s' under '%s/runs':",
			 r->o.resume, r->o.state);
	if (cave_journal_read(path, resume_line, s, &e) < 0)
		cave_die(CAVE_EX_DATA, "%s", e.msg);
	if (jv_get_kind(s->start) != JV_KIND_OBJECT)
		cave_die(CAVE_EX_DATA, "'%s': no run.start of cave run: nothing to resume", path);
	snprintf(r->em.run, sizeof r->em.run, "%s", cave_jv_str(s->start, "run", ""));
	snprintf(r->em.span, sizeof r->em.span, "%s", cave_jv_str(s->start, "span", ""));
	snprintf(r->top.span, sizeof r->top.span, "%s", r->em.span);
	opts = jv_object_get(jv_copy(s->start), jv_string("options"));
	dir = cave_jv_str(opts, "agent_dir", NULL);
	if (!dir)
		cave_die(CAVE_EX_DATA, "'%s': run.start names no agent directory", path);
	if (cave_agent_load(dir, &r->ag, &e) < 0)
		cave_die(CAVE_EX_CONFIG, "%s", e.msg);
	if (strcmp(r->ag.digest, cave_jv_str(s->start, "agent_digest", "")) != 0)
		cave_warn("the agent definition changed since the run started; going on with "
			  "the current one");
	opts_resume(&r->o, opts);
	jv_free(opts);
	snprintf(path, sizeof path, "%s/resume.json", r->dir);
	s->prior_resume = read_json_file(path);
	r->em.seq = s->seq;
	{
		/* the ring's members go on past every seq in the journal */
		char from[32];
		snprintf(from, sizeof from, "%llu", (unsigned long long)s->seq_all);
		setenv("CAVE_SEQ_FROM", from, 1);
	}
	r->ncalls = s->maxc;
	r->ntools = s->maxt;
}

/* What is left of a budget after the journal's spend (and the worst case
 * of calls whose outcome is unknown), for resume.json: cave-budget
 * --restore rebuilds the ledger itself from the journal. */
static char *remaining(const char *max, double spent, double unknown_worst, bool usd)
{
	char out[64], *end;
	double m = strtod(max, &end), left;
	if (end == max || *end)
		cave_die(CAVE_EX_DATA, "resume: bad budget '%s' in the journal", max);
	left = m - spent - unknown_worst;
	if (left < 0)
		left = 0;
	if (usd) {
		int64_t pico = cave_receipt_pico(left);
		char buf[32];
		cave_usd_format(pico, buf);
		snprintf(out, sizeof out, "%s", buf);
	} else {
		snprintf(out, sizeof out, "%lld", (long long)left);
	}
	return cave_xstrdup(out);
}

static void resume_open(struct run *r, const char *path)
{
	struct rs *s = &rs_state;
	size_t torn = 0;
	cave_err e;
	jv rj = cave_receipt_jv(r->rc), side;
	unsigned long unknown = cave_receipt_unknown_calls(r->rc);
	double spent_usd = jv_number_value(jv_object_get(jv_copy(rj), jv_string("totalEstimatedUsd")));
	double worst = 0;
	bool usd = r->o.max_usd != NULL;
	const char *max = usd ? r->o.max_usd : r->o.max_tokens;
	char *left = NULL;
	long attempts;
	char usdbuf[32];

	if (cave_journal_open(&r->j, path, &torn, &e) < 0)
		cave_die(CAVE_EX_IO, "%s", e.msg);
	if (torn)
		cave_warn("the journal ended in a torn line (%zu bytes, cut): the crash came "
			  "while it was written", torn);
	if (jv_get_kind(s->outcome) == JV_KIND_NULL && jv_get_kind(s->last_req) == JV_KIND_OBJECT &&
	    jv_get_kind(s->budget) == JV_KIND_OBJECT) {
		/* the held worst case of the unknown call stays booked */
		double reserved = jv_number_value(jv_object_get(jv_copy(s->budget), jv_string("reserved")));
		worst = reserved > 0 ? reserved : 0;
	}
	if (max) {
		/* the run keeps its budget: cave-budget --restore (build_ring)
		 * books the journal's spend, and this worst case, against it */
		double spent = 0;
		if (jv_get_kind(s->budget) == JV_KIND_OBJECT)
			spent = jv_number_value(jv_object_get(jv_copy(s->budget), jv_string("spent")));
		left = remaining(max, spent, worst, usd);
	}
	if (jv_get_kind(s->prior_resume) == JV_KIND_OBJECT)
		attempts = (long)cave_jv_int(s->prior_resume, "attempts", 1) + 1;
	else
		attempts = 2; /* the first run and this one */
	side = jv_object();
	side = jv_object_set(side, jv_string("run"), jv_string(r->em.run));
	side = jv_object_set(side, jv_string("attempts"), jv_number((double)attempts));
	side = jv_object_set(side, jv_string("prior_calls"), jv_number((double)s->maxc));
	side = jv_object_set(side, jv_string("prior_estimated_usd"), jv_number(spent_usd));
	side = jv_object_set(side, jv_string("unknown_calls"), jv_number((double)unknown));
	side = jv_object_set(side, jv_string("possible_double_count"),
			     unknown ? jv_true() : jv_false());
	side = jv_object_set(side, jv_string("unknown_worst_case"), jv_number(worst));
	if (max) {
		side = jv_object_set(side, jv_string("budget_max"), jv_string(max));
		side = jv_object_set(side, jv_string("budget_left"), jv_string(left));
	}
	free(left);
	side = jv_object_set(side, jv_string("torn_bytes"), jv_number((double)torn));
	side = jv_object_set(side, jv_string("ended_before"), s->ended ? jv_true() : jv_false());
	{
		char sp[PATH_MAX + 32];
		snprintf(sp, sizeof sp, "%s/resume.json", r->dir);
		if (write_json_file(sp, side) < 0)
			cave_warn("cannot write '%s':", sp);
	}
	cave_warn("resuming run %s (attempt %ld): %lu prior call%s, %s USD booked%s", r->em.run,
		  attempts, s->maxc, s->maxc == 1 ? "" : "s",
		  cave_usd_format(cave_receipt_pico(spent_usd), usdbuf),
		  unknown ? "; a call in flight at the crash has an unknown outcome and may "
			    "have been billed: its spend may be counted twice" : "");
	jv_free(rj);
}

/* The answer to tool call u of the interrupted turn, from the journal: a
 * tool's result, a subagent's end, or (for work that was running at the
 * crash and must not be repeated) an interruption. Returns true when
 * pending p is answered; false when the call is to be made now. */
static bool resume_answer(struct run *r, struct pending *p)
{
	struct rs *s = &rs_state;
	jv sub = jv_object_get(jv_copy(s->subs), jv_string(p->use_id));
	bool done = false;
	(void)r;
	if (jv_get_kind(sub) == JV_KIND_OBJECT) {
		jv end = jv_object_get(jv_copy(sub), jv_string("end"));
		if (jv_get_kind(end) == JV_KIND_OBJECT)
			p->block = sub_block(p->use_id, cave_jv_str(end, "stop_reason", ""),
					     cave_jv_str(end, "error", ""),
					     cave_jv_str(end, "output", ""));
		else
			p->block = cave_turn_error_block(p->use_id, "[interrupted: this subagent "
							 "was running at a crash; it is not "
							 "run again]");
		jv_free(end);
		jv_free(sub);
		p->done = true;
		return true;
	}
	jv_free(sub);
	jv_array_foreach(s->treqs, k, t) {
		(void)k;
		if (!done && strcmp(cave_jv_str(t, "call_id", ""), p->use_id) == 0) {
			jv x = jv_object_get(jv_copy(s->tres), jv_string(cave_jv_str(t, "id", "")));
			snprintf(p->id, sizeof p->id, "%s", cave_jv_str(t, "id", ""));
			if (jv_get_kind(x) == JV_KIND_OBJECT) {
				p->block = cave_turn_result_block(p->use_id, x);
				done = true;
			} else if (strcmp(cave_jv_str(t, "effect", ""), "write") == 0) {
				p->block = cave_turn_error_block(p->use_id, "[interrupted: this write "
								 "tool was running at a crash; it "
								 "is not run again]");
				done = true;
			}
			jv_free(x);
		}
		jv_free(t);
	}
	p->done = done;
	return done;
}

static void resume_continue(struct run *r)
{
	struct rs *s = &rs_state;
	struct frame *f = &r->top;
	jv content, uses;
	int n;
	if (s->ended) {
		cave_warn("run %s had already ended; its receipt is written again", r->em.run);
		f->ended = r->end_back = true;
		return;
	}
	if (jv_get_kind(s->last_req) != JV_KIND_OBJECT)
		cave_die(CAVE_EX_DATA, "run %s never sent a call: start it again", r->em.run);
	jv_free(f->messages);
	f->messages = jv_object_get(jv_copy(s->last_req), jv_string("messages"));
	if (jv_get_kind(s->outcome) != JV_KIND_OBJECT ||
	    strcmp(cave_jv_str(s->outcome, "type", ""), "call.response") != 0) {
		/* no outcome (in flight at the crash: unknown) or a failure: the
		 * call goes again under a new id */
		send_call(r, f);
		return;
	}
	content = jv_object_get(jv_copy(s->outcome), jv_string("content"));
	uses = cave_turn_tool_uses(content);
	n = jv_array_length(jv_copy(uses));
	if (jv_array_length(jv_copy(content)) > 0)
		f->messages = jv_array_append(f->messages,
					      cave_turn_message("assistant", jv_copy(content)));
	jv_free(content);
	if (n == 0) {
		jv_free(uses);
		finish(r, f, "complete");
		return;
	}
	/* tools answered before the crash keep their results; the others run
	 * again, except writes and subagents, which are never redone */
	pending_clear(f);
	for (int i = 0; i < n && f->npend < MAX_PENDING; i++) {
		jv u = jv_array_get(jv_copy(uses), i);
		struct pending *p = &f->pend[f->npend++];
		const struct cave_agent_tool *t;
		jv input = jv_object_get(jv_copy(u), jv_string("input"));
		memset(p, 0, sizeof *p);
		p->block = jv_invalid();
		p->use_id = cave_xstrdup(cave_jv_str(u, "id", ""));
		p->name = cave_xstrdup(cave_jv_str(u, "name", ""));
		t = cave_agent_tool(f->ag, p->name);
		p->write = t && t->write;
		if (!resume_answer(r, p))
			call_tool(r, f, p, t, input);
		jv_free(input);
		jv_free(u);
	}
	jv_free(uses);
	tools_done(r, f);
}

int main(int argc, char **argv)
{
	struct run r;
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t block, old;
	cave_err e;
	char path[PATH_MAX + 32], input_digest[CAVE_SHA256_HEX];
	struct cave_buf prompt;
	jv start, opts, conv_meta = jv_null();
	long epoch = 0;
	int rc;

	cave_set_prog(SRC);
	memset(&r, 0, sizeof r);
	r.conv_lock = -1;
	frame_init(&r.top, NULL, &r.ag);
	r.prior = jv_null();
	parse_opts(&r, argc, argv);
	unsetenv("CAVE_SEQ_FROM"); /* set by a resume only, for the ring */
	cave_emitter_init(&r.em, SRC);

	if (r.o.resume) {
		if (optind < argc)
			cave_die(CAVE_EX_USAGE, "--resume takes no agent or prompt");
		resume_load(&r);
	} else {
		if (argc - optind < 2) {
			fputs(usage, stderr);
			return CAVE_EX_USAGE;
		}
		if (cave_agent_load(argv[optind], &r.ag, &e) < 0)
			cave_die(CAVE_EX_CONFIG, "%s", e.msg);
	}
	opts_defaults(&r.o);
	if (!r.rc) {
		r.cat = cave_catalog_load(r.o.catalog, &e);
		if (!r.cat)
			cave_warn("%s; every call is unpriced", e.msg);
		r.rc = cave_receipt_new(r.cat);
	}

	cave_buf_init(&prompt, CAVE_EVENT_MAX / 4);
	if (!r.o.resume) {
		for (int i = optind + 1; i < argc; i++) {
			if (strcmp(argv[i], "-") == 0) {
				if (cave_buf_read_fd(&prompt, STDIN_FILENO) < 0)
					cave_die(errno == ENOBUFS ? CAVE_EX_DATA : CAVE_EX_IO, "<stdin>: %s",
						 errno == ENOBUFS ? "prompt too large" : strerror(errno));
			} else {
				if (prompt.len)
					cave_buf_addc(&prompt, ' ');
				if (cave_buf_adds(&prompt, argv[i]) < 0)
					cave_die(CAVE_EX_USAGE, "prompt too long");
			}
		}
		if (!prompt.len)
			cave_die(CAVE_EX_USAGE, "empty prompt");
		cave_uuid4(r.em.run);
		cave_span_id(r.em.span);
		snprintf(r.top.span, sizeof r.top.span, "%s", r.em.span);
		if (r.o.conversation)
			epoch = conv_open(&r, &conv_meta);
	}
	snprintf(r.dir, sizeof r.dir, "%s/runs/%s", r.o.state, r.em.run);
	if (cave_mkdirs(r.dir, &e) < 0)
		cave_die(CAVE_EX_IO, "%s", e.msg);
	snprintf(path, sizeof path, "%s/events.ndjson", r.dir);

	/* signals: held until the loop waits, so none is lost in between */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &old);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	if (r.o.resume) {
		resume_open(&r, path);
	} else {
		if (cave_journal_open(&r.j, path, NULL, &e) < 0)
			cave_die(CAVE_EX_IO, "%s", e.msg);
	}
	build_ring(&r);
	cave_io_init(&r.rin, r.ring.from_ring, -1);
	r.rin.in_name = "ring";
	cave_io_init(&r.rout, -1, r.ring.to_ring);
	cave_io_init(&r.out, -1, STDOUT_FILENO);

	if (r.o.resume) {
		resume_continue(&r);
	} else {
		cave_sha256_hex(prompt.data, prompt.len, input_digest);
		opts = jv_object();
		opts = jv_object_set(opts, jv_string("agent_dir"), jv_string(r.ag.dir));
		opts = opts_jv(&r.o, opts);
		if (r.o.conversation) {
			opts = jv_object_set(opts, jv_string("conversation"), jv_string(r.o.conversation));
			opts = jv_object_set(opts, jv_string("cache_epoch"), jv_number((double)epoch));
		}
		opts = jv_object_set(opts, jv_string("filters"), jv_number(r.o.nfilters));
		start = cave_event_new("run.start", SRC);
		start = jv_object_set(start, jv_string("agent"), jv_string(r.ag.id));
		start = jv_object_set(start, jv_string("agent_digest"), jv_string(r.ag.digest));
		start = jv_object_set(start, jv_string("input_digest"), jv_string(input_digest));
		if (r.cat)
			start = jv_object_set(start, jv_string("catalog_digest"),
					      jv_string(cave_catalog_digest(r.cat)));
		start = jv_object_set(start, jv_string("options"), opts);
		emit(&r, &r.top, start, false);
		r.top.messages = jv_array_append(r.top.messages,
						 cave_turn_message("user", jv_string_sized(prompt.data,
											  (int)prompt.len)));
		send_call(&r, &r.top);
	}

	if (loop(&r, &old) < 0 && !r.sig) {
		cave_ring_signal(&r.ring, SIGTERM);
		close_ring(&r);
	}
	close_ring(&r);
	if (cave_ring_reap(&r.ring, DRAIN_MS) > 0) {
		cave_ring_signal(&r.ring, SIGKILL);
		cave_ring_reap(&r.ring, -1);
	}
	/* subagents still running at an abort end too, deepest first; their
	 * parents are not told (nothing more is sent) */
	for (size_t i = r.nframes; i-- > 0;)
		if (!r.frames[i]->ended) {
			r.frames[i]->ended = true;
			snprintf(r.frames[i]->error, sizeof r.frames[i]->error, "%s",
				 r.sig > 0 ? "aborted" : "ring_closed");
			end_event(&r, r.frames[i]);
		}
	if (!r.top.ended) {
		/* an abort, or a ring that ended early: the end goes to the journal */
		if (!r.sig && !r.exit_code) {
			const struct cave_ring_member *m = cave_ring_failed(&r.ring);
			cave_warn("the ring closed before the run ended%s%s",
				  m ? ": " : "", m ? cave_ring_name(m) : "");
			fail(&r, CAVE_EX_SOFTWARE, "ring_closed");
		} else if (r.sig > 0) {
			fail(&r, 128 + r.sig, "aborted");
		}
		r.top.ended = true;
		if (r.top.answer.len)
			newline(&r);
		end_event(&r, &r.top);
	} else if (r.sig > 0 && !r.exit_code) {
		/* a signal after the end: the run is complete */
	}
	rc = finish_run(&r);
	if (r.conv_lock >= 0)
		conv_close(&r, conv_meta, rc == 0 && !r.top.error[0] && !r.sig);
	else
		jv_free(conv_meta);
	if (r.sig > 0)
		rc = 128 + r.sig;
	for (size_t i = 0; i < r.nframes; i++)
		r.frames[i]->dead = true;
	sweep(&r);
	frame_fini(&r.top);
	cave_io_free(&r.rin);
	cave_io_free(&r.rout);
	cave_io_free(&r.out);
	cave_ring_free(&r.ring);
	for (size_t i = 0; i < r.nmembers; i++)
		free(r.members[i]);
	jv_free(r.prior);
	cave_receipt_free(r.rc);
	cave_catalog_free(r.cat);
	cave_agent_free(&r.ag);
	jv_free(r.o.kept);
	cave_buf_free(&prompt);
	return rc;
}

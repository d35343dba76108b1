/* cave-budget: the ledger filter. Reserves every call's worst case before
 * it leaves, lowers max_output_tokens to what the remainder affords, stops
 * the run between calls below the floor, and settles the responses it sees
 * (in the ring; in a straight pipe they are downstream); there it also
 * decides each retry cave-call would make, and cancels one it cannot fund
 * (retry.cancel, which cave-call obeys). The arithmetic is
 * lib/ledger.c and lib/reserve.c; this file folds events into them.
 * It must never pass a call.request it has not reserved under a budget,
 * never clamp a measured amount, and never take a release from anything
 * but the user's control channel or hook (no model output reaches it). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "catalog.h"
#include "digest.h"
#include "event.h"
#include "io.h"
#include "json.h"
#include "journal.h"
#include "ledger.h"
#include "msg.h"
#include "proto.h"
#include "reserve.h"

#define SRC "cave-budget"
#define HOOK_OUT_MAX ((size_t)64 << 10)
#define HOOK_TIMEOUT_MS 30000
#define CONTROL_LINE_MAX ((size_t)64 << 10)

struct hold {
	char span[17];
	char *id;
	struct cave_wallet *w;
	const struct cave_model *m;
	int64_t amount;
	bool cancelled;             /* its retry was given up (retry.cancel sent) */
};

struct budget {
	struct cave_io io;
	struct cave_emitter em;
	struct cave_catalog *cat;
	struct cave_ledger *ledger; /* NULL without a budget */
	enum cave_denom denom;
	bool cost_cap;              /* --max-cost-usd: exhaustion is an error */
	int64_t retry_max;          /* --max-retry-usd/-tokens; -1: no retry budget */
	int64_t retry_spent;        /* what failed attempts have cost, run-wide */
	int64_t floor;
	long max_model_calls, max_tool_calls, model_calls, tool_calls;
	long deadline_ms;           /* -1: none */
	struct timespec t0;
	const char *hook;
	int control_fd;
	struct cave_buf control_in;
	struct hold *holds;
	size_t nholds, capholds;
	char root_span[17];
	bool announced;
	bool unbounded;             /* no budget of the run's own: the ledger
				     * exists only for subagents' wallets */
	const char *stopped;        /* the reason once the run was stopped */
	unsigned long settled;      /* model calls settled so far (at_call) */
	int exit_code;
	unsigned long lineno;
	bool replaying;             /* --restore: folding the journal; emit() keeps quiet */
	jv stash;                   /* its settlements, until the journal shows them */
};

static void usage(int code)
{
	fprintf(code ? stderr : stdout,
		"usage: cave-budget [--max-usd X | --max-tokens N | --max-cost-usd X]\n"
		"                   [--initial-usd X | --initial-tokens N] [--output-floor N]\n"
		"                   [--max-model-calls N] [--max-tool-calls N] [--deadline-ms N]\n"
		"                   [--max-retry-usd X | --max-retry-tokens N]\n"
		"                   [--control FIFO] [--on-exhausted CMD] [--catalog FILE]\n"
		"                   [--restore JOURNAL [--restore-bytes N]]\n"
		"A retry budget bounds what failed attempts may cost, in the run's\n"
		"denomination: a retry is let go only while the failed attempts' measured\n"
		"spend plus the worst case of one more attempt fits it; otherwise the\n"
		"retry is cancelled (retry.cancel to cave-call) and the run stops.\n"
		"--restore rebuilds the ledger of a resumed run from its journal (its\n"
		"first N bytes): the same budget, its spend and the calls counted; a call\n"
		"in flight at the crash is booked as spent at its worst case.\n");
	exit(code);
}

static long parse_long(const char *opt, const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0)
		cave_die(CAVE_EX_USAGE, "%s: expected a non-negative integer, not '%s'", opt, s);
	return v;
}

static int64_t parse_amount(const char *opt, enum cave_denom d, const char *s)
{
	int64_t v;

	if (cave_amount_parse(d, s, &v) < 0)
		cave_die(CAVE_EX_USAGE, "%s: expected a non-negative %s, not '%s'", opt,
			 d == CAVE_DENOM_USD ? "amount of USD (at most 12 decimals)"
					     : "whole number of tokens", s);
	return v;
}

static char *fmt_amount(enum cave_denom d, int64_t v, char out[32])
{
	if (d == CAVE_DENOM_USD)
		return cave_usd_format(v, out);
	snprintf(out, 32, "%lld", (long long)v);
	return out;
}

static jv amount_jv(enum cave_denom d, int64_t v)
{
	return d == CAVE_DENOM_USD ? cave_usd_jv(v) : jv_number((double)v);
}

/* A JSON number (borrowed) as an amount in d; -1 when it is not one. */
static int amount_from_jv(enum cave_denom d, jv v, int64_t *out)
{
	jv s;
	int r;

	if (jv_get_kind(v) != JV_KIND_NUMBER)
		return -1;
	s = jv_dump_string(jv_copy(v), 0);
	r = cave_amount_parse(d, jv_string_value(s), out);
	jv_free(s);
	return r;
}

static long elapsed_ms(const struct budget *b)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long)((now.tv_sec - b->t0.tv_sec) * 1000 +
		      (now.tv_nsec - b->t0.tv_nsec) / 1000000);
}

/* ---- emitting ---- */

static void emit(struct budget *b, jv ev, const char *span) /* consumes ev */
{
	char saved[17];

	if (b->replaying) {
		/* the journal holds what this says, but for a settlement the
		 * crash may have kept out of it (restore() emits those) */
		if (!strcmp(cave_jv_str(ev, "type", ""), "budget.settle"))
			b->stash = jv_array_append(b->stash, JV_ARRAY(jv_string(span ? span : ""), ev));
		else
			jv_free(ev);
		return;
	}
	memcpy(saved, b->em.span, sizeof(saved));
	if (span && *span)
		snprintf(b->em.span, sizeof(b->em.span), "%s", span);
	cave_io_emit(&b->io, cave_emitter_stamp(&b->em, ev));
	memcpy(b->em.span, saved, sizeof(saved));
}

static const char *wallet_span(const struct budget *b, const struct cave_wallet *w)
{
	return cave_wallet_parent(w) ? cave_wallet_key(w) : b->root_span;
}

static void emit_state(struct budget *b, const struct cave_wallet *w)
{
	struct cave_wallet_state st;
	jv ev;

	if (b->unbounded && !cave_wallet_parent(w))
		return; /* the run has no budget to report */
	ev = cave_event_new("budget.state", SRC);
	cave_wallet_state(w, &st);
	ev = jv_object_set(ev, jv_string("denomination"), jv_string(cave_denom_name(b->denom)));
	ev = jv_object_set(ev, jv_string("max"), amount_jv(b->denom, st.max));
	ev = jv_object_set(ev, jv_string("released"), amount_jv(b->denom, st.released));
	ev = jv_object_set(ev, jv_string("spent"), amount_jv(b->denom, st.spent));
	ev = jv_object_set(ev, jv_string("reserved"), amount_jv(b->denom, st.reserved));
	ev = jv_object_set(ev, jv_string("cap_breached"), jv_bool(st.cap_breached));
	ev = jv_object_set(ev, jv_string("overspent"), amount_jv(b->denom, st.overspent));
	emit(b, ev, wallet_span(b, w));
}

/* The state of w and of every wallet above it (their spent includes w's). */
static void emit_states_up(struct budget *b, const struct cave_wallet *w)
{
	for (; w; w = cave_wallet_parent(w))
		emit_state(b, w);
}

static void announce(struct budget *b)
{
	if (b->announced || !b->ledger)
		return;
	b->announced = true;
	emit_state(b, cave_ledger_root(b->ledger));
}

/* Adopts the run and, the first time, the root span from an event. */
static void learn(struct budget *b, jv ev)
{
	const char *span = cave_jv_str(ev, "span", NULL);

	if (!b->em.run[0])
		cave_emitter_follow(&b->em, ev);
	if (!b->root_span[0] && span) {
		snprintf(b->root_span, sizeof(b->root_span), "%s", span);
		snprintf(b->em.span, sizeof(b->em.span), "%s", span);
	}
}

static void emit_stop(struct budget *b, const char *reason, const char *span,
		      const char *msg)
{
	jv ev = cave_event_new("run.stop", SRC);

	ev = jv_object_set(ev, jv_string("reason"), jv_string(reason));
	ev = jv_object_set(ev, jv_string("message"), jv_string(msg));
	emit(b, ev, span);
	if (!span || !*span || !strcmp(span, b->root_span))
		b->stopped = reason;
}

/* A refusal that is an error, not a stop: a final call.error for req. */
static void emit_refusal(struct budget *b, jv req, const char *code, const char *msg)
{
	jv ev = cave_event_new("call.error", SRC);

	ev = jv_object_set(ev, jv_string("id"), jv_string(cave_jv_str(req, "id", "")));
	ev = jv_object_set(ev, jv_string("provider"), jv_string(cave_jv_str(req, "provider", "")));
	ev = jv_object_set(ev, jv_string("model"), jv_string(cave_jv_str(req, "model", "")));
	ev = jv_object_set(ev, jv_string("code"), jv_string(code));
	ev = jv_object_set(ev, jv_string("retryable"), jv_false());
	ev = jv_object_set(ev, jv_string("status"), jv_null());
	ev = jv_object_set(ev, jv_string("attempt"), jv_number(0));
	ev = jv_object_set(ev, jv_string("final"), jv_true());
	ev = jv_object_set(ev, jv_string("message"), jv_string(msg));
	emit(b, ev, cave_jv_str(req, "span", NULL));
	cave_warn("%s: %s", code, msg);
	b->exit_code = CAVE_EX_POLICY;
}

/* ---- holds ---- */

static struct hold *hold_find(struct budget *b, const char *span, const char *id)
{
	for (size_t i = 0; i < b->nholds; i++)
		if (!strcmp(b->holds[i].id, id) && !strcmp(b->holds[i].span, span))
			return &b->holds[i];
	return NULL;
}

static void hold_add(struct budget *b, const char *span, const char *id,
		     struct cave_wallet *w, const struct cave_model *m, int64_t amount)
{
	struct hold *h;

	if (b->nholds == b->capholds) {
		b->capholds = b->capholds ? b->capholds * 2 : 16;
		b->holds = cave_xrealloc(b->holds, b->capholds * sizeof(*b->holds));
	}
	h = &b->holds[b->nholds++];
	snprintf(h->span, sizeof(h->span), "%s", span);
	h->id = cave_xstrdup(id);
	h->w = w;
	h->m = m;
	h->amount = amount;
	h->cancelled = false;
}

static void hold_drop(struct budget *b, struct hold *h)
{
	free(h->id);
	*h = b->holds[--b->nholds];
}

/* ---- tranches ---- */

/* Applies a release of amount to the root; emits budget.release and the
 * state, or says why it was refused. Returns 0 when released. */
static int apply_release(struct budget *b, int64_t amount, const char *reason,
			 const char *source)
{
	struct cave_wallet *root = cave_ledger_root(b->ledger);
	char a[32];
	jv ev;

	if (cave_wallet_release(root, amount) < 0) {
		cave_warn("release of %s from %s refused: past max or not positive",
			  fmt_amount(b->denom, amount, a), source);
		return -1;
	}
	announce(b);
	ev = cave_event_new("budget.release", SRC);
	ev = jv_object_set(ev, jv_string("amount"), amount_jv(b->denom, amount));
	ev = jv_object_set(ev, jv_string("reason"), jv_string(reason && *reason ? reason : source));
	ev = jv_object_set(ev, jv_string("at_call"), jv_number((double)b->settled));
	ev = jv_object_set(ev, jv_string("source"), jv_string(source));
	emit(b, ev, b->root_span);
	emit_state(b, root);
	return 0;
}

/* A budget.release event (borrowed) from the control channel. */
static void control_release(struct budget *b, jv ev, const char *source)
{
	int64_t amount;
	jv v;

	if (!b->ledger) {
		cave_warn("release from %s ignored: no budget", source);
		return;
	}
	v = jv_object_get(jv_copy(ev), jv_string("amount"));
	if (amount_from_jv(b->denom, v, &amount) < 0)
		cave_warn("release from %s ignored: 'amount' is not an amount in %s",
			  source, cave_denom_name(b->denom));
	else
		apply_release(b, amount, cave_jv_str(ev, "reason", NULL), source);
	jv_free(v);
}

/* Runs the --on-exhausted hook with ctx (consumed) on its stdin; returns
 * its answer (caller frees) or NULL when it failed. */
static char *run_hook(const char *cmd, jv ctx)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, status;
	char *text = NULL, *answer = NULL;
	size_t len;
	struct cave_buf ob;
	pid_t pid = -1;
	long waited = 0;

	cave_buf_init(&ob, HOOK_OUT_MAX);
	{
		jv s = jv_dump_string(ctx, 0); /* consumes ctx */

		text = cave_xstrdup(jv_string_value(s));
		jv_free(s);
	}
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) {
		cave_warn("on-exhausted: cannot make a pipe:");
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		cave_warn("on-exhausted: cannot fork:");
		goto out;
	}
	if (pid == 0) {
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
			_exit(127);
		signal(SIGPIPE, SIG_DFL);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	in[0] = out[1] = -1;
	len = strlen(text);
	for (size_t off = 0; off < len;) {
		ssize_t w = write(in[1], text + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break; /* the hook need not read its context */
		off += (size_t)w;
	}
	if (write(in[1], "\n", 1) < 0) {
		/* as above */
	}
	close(in[1]);
	in[1] = -1;
	for (;;) {
		struct pollfd p = { .fd = out[0], .events = POLLIN };
		char chunk[4096];
		ssize_t r;
		int pr = poll(&p, 1, 100);

		if (pr < 0 && errno != EINTR)
			break;
		if (pr == 0) {
			waited += 100;
			if (waited >= HOOK_TIMEOUT_MS) {
				cave_warn("on-exhausted: no answer in %d ms", HOOK_TIMEOUT_MS);
				kill(pid, SIGKILL);
				goto out;
			}
			continue;
		}
		r = read(out[0], chunk, sizeof(chunk));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (cave_buf_add(&ob, chunk, (size_t)r) < 0) {
			cave_warn("on-exhausted: answer longer than %zu bytes", HOOK_OUT_MAX);
			kill(pid, SIGKILL);
			goto out;
		}
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	pid = -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		cave_warn("on-exhausted: hook failed; the run stops");
		goto out;
	}
	answer = cave_buf_take(&ob, NULL);
out:
	if (pid > 0)
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
	}
	cave_buf_free(&ob);
	free(text);
	return answer;
}

/* One escalation for an exhaustion at the root: asks the hook, applies
 * what it releases. Returns 0 when something was released. */
static int escalate(struct budget *b, jv req, int64_t needed)
{
	struct cave_wallet *root = cave_ledger_root(b->ledger);
	struct cave_wallet_state st;
	char *answer, *p, *end;
	int ret = -1;
	jv ctx, ans = jv_invalid();

	cave_wallet_state(root, &st);
	ctx = JV_OBJECT(jv_string("event"), jv_string("budget.exhausted"),
			jv_string("denomination"), jv_string(cave_denom_name(b->denom)),
			jv_string("max"), amount_jv(b->denom, st.max),
			jv_string("released"), amount_jv(b->denom, st.released),
			jv_string("spent"), amount_jv(b->denom, st.spent),
			jv_string("reserved"), amount_jv(b->denom, st.reserved),
			jv_string("remaining"), amount_jv(b->denom, cave_wallet_remaining(root)),
			jv_string("needed"), amount_jv(b->denom, needed),
			jv_string("at_call"), jv_number((double)b->settled));
	ctx = jv_object_set(ctx, jv_string("call_id"), jv_string(cave_jv_str(req, "id", "")));
	ctx = jv_object_set(ctx, jv_string("provider"), jv_string(cave_jv_str(req, "provider", "")));
	ctx = jv_object_set(ctx, jv_string("model"), jv_string(cave_jv_str(req, "model", "")));
	answer = run_hook(b->hook, ctx);
	if (!answer)
		goto out;
	for (p = answer; *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'; p++)
		;
	end = p + strlen(p);
	while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
		*--end = '\0';
	if (!strcmp(p, "stop"))
		goto out;
	ans = jv_parse(p);
	if (jv_get_kind(ans) != JV_KIND_OBJECT) {
		cave_warn("on-exhausted: answer is neither 'stop' nor {\"release\":X,\"reason\":...}");
		goto out;
	}
	{
		jv v = jv_object_get(jv_copy(ans), jv_string("release"));
		int64_t amount;

		if (amount_from_jv(b->denom, v, &amount) < 0)
			cave_warn("on-exhausted: 'release' is not an amount in %s",
				  cave_denom_name(b->denom));
		else if (apply_release(b, amount, cave_jv_str(ans, "reason", NULL), "hook") == 0)
			ret = 0;
		jv_free(v);
	}
out:
	jv_free(ans);
	free(answer);
	return ret;
}

/* ---- the events this filter owns ---- */

static struct cave_wallet *wallet_of(struct budget *b, const char *span)
{
	struct cave_wallet *w = span && *span ? cave_ledger_find(b->ledger, span) : NULL;

	return w ? w : cave_ledger_root(b->ledger);
}

static const char *admit_reason(enum cave_admit a)
{
	return a == CAVE_ADMIT_REVOKED ? "wallet_revoked" : "budget_exhausted";
}

/* Stops (or, under --max-cost-usd, refuses with an error) instead of
 * sending req. */
static void refuse_call(struct budget *b, jv req, enum cave_admit a, const char *msg)
{
	if (b->cost_cap && a != CAVE_ADMIT_REVOKED)
		emit_refusal(b, req, "cave_run_cost_budget_exceeded", msg);
	else
		emit_stop(b, admit_reason(a), cave_jv_str(req, "span", NULL), msg);
}

/* A call.request as a scan of its line saw it (scan_request): the members
 * the input ceiling measures (system, messages, tools, restorable_bytes,
 * in the order cave_reserve_input_ceiling_scanned takes), then the ones
 * on_request and learn() read, which go into a small object of their own. */
enum { RQ_SYSTEM, RQ_MESSAGES, RQ_TOOLS, RQ_RESTORE, RQ_MAX_OUT, RQ_TYPE, RQ_SRC,
       RQ_RUN, RQ_SPAN, RQ_ID, RQ_PROVIDER, RQ_MODEL, RQ_N };
struct req_scan {
	size_t close;
	struct cave_json_field f[RQ_N];
};

/* rs: the scan the small req was made from, or NULL when req is the
 * whole parsed event */
static void on_request(struct budget *b, char *line, size_t len, jv req,
		       const struct req_scan *rs)
{
	const char *span = cave_jv_str(req, "span", "");
	const char *id = cave_jv_str(req, "id", NULL);
	const struct cave_model *m = NULL;
	struct cave_wallet *w;
	int64_t in, out, cost, clamped = -1;
	enum cave_admit a;
	bool escalated = false;
	char msg[256], x[32], y[32];

	if (b->stopped) {
		snprintf(msg, sizeof(msg), "the run was stopped (%s); call not sent", b->stopped);
		emit_stop(b, b->stopped, span, msg);
		return;
	}
	if (b->deadline_ms >= 0 && elapsed_ms(b) >= b->deadline_ms) {
		snprintf(msg, sizeof(msg), "deadline of %ld ms passed; call not sent", b->deadline_ms);
		emit_stop(b, "deadline", span, msg);
		return;
	}
	if (b->model_calls >= b->max_model_calls) {
		snprintf(msg, sizeof(msg), "%ld model calls reached; call not sent", b->model_calls);
		emit_stop(b, "call_budget_exhausted", span, msg);
		return;
	}
	if (!b->ledger || (b->unbounded && !cave_wallet_parent(wallet_of(b, span)))) {
		b->model_calls++;
		cave_io_pass(&b->io, line, len);
		return;
	}
	if (!id) {
		emit_refusal(b, req, "bad_request", "call.request without an 'id' cannot be reserved");
		return;
	}
	m = cave_catalog_find(b->cat, cave_jv_str(req, "provider", ""), cave_jv_str(req, "model", ""));
	if (b->denom == CAVE_DENOM_USD && (!m || !m->priced)) {
		snprintf(msg, sizeof(msg), "'%s/%s' has no catalog price; a USD budget cannot bound it",
			 cave_jv_str(req, "provider", "?"), cave_jv_str(req, "model", "?"));
		emit_refusal(b, req, "cave_budget_denomination_unavailable", msg);
		return;
	}
	in = rs ? cave_reserve_input_ceiling_scanned(&rs->f[RQ_SYSTEM], m)
		: cave_reserve_input_ceiling(req, m);
	out = cave_reserve_output_allowance(req, m);
	if (out < 0 || cave_reserve_cost(b->denom, m, in, out, &cost) < 0) {
		emit_refusal(b, req, "cave_budget_unbounded",
			     "the call has no output limit or its worst case does not fit the ledger");
		return;
	}
	w = wallet_of(b, span);
	announce(b);
	for (;;) {
		int64_t rem, k;

		a = cave_wallet_check(w, cost);
		if (a == CAVE_ADMIT_OK)
			break;
		if (a != CAVE_ADMIT_SHORT) {
			snprintf(msg, sizeof(msg), a == CAVE_ADMIT_REVOKED ? "the wallet was revoked; call not sent"
				 : a == CAVE_ADMIT_CLOSED ? "the wallet has ended; call not sent"
				 : "the budget was breached by an over-report; nothing further is funded");
			refuse_call(b, req, a, msg);
			return;
		}
		rem = cave_wallet_remaining(w);
		k = cave_reserve_afford_output(b->denom, m, in, rem);
		if (k >= b->floor && k < out) {
			clamped = k;
			if (cave_reserve_cost(b->denom, m, in, k, &cost) < 0 ||
			    cave_wallet_check(w, cost) != CAVE_ADMIT_OK)
				cave_die(CAVE_EX_SOFTWARE, "internal error: a clamped call does not fit");
			break;
		}
		if (!escalated && b->hook && !cave_wallet_parent(w)) {
			escalated = true;
			if (escalate(b, req, cost) == 0)
				continue;
		}
		snprintf(msg, sizeof(msg), "remaining %s affords %lld output tokens, below the floor of %lld "
			 "(worst case %s)", fmt_amount(b->denom, rem < 0 ? 0 : rem, x),
			 (long long)(k < 0 ? 0 : k), (long long)b->floor, fmt_amount(b->denom, cost, y));
		refuse_call(b, req, CAVE_ADMIT_SHORT, msg);
		return;
	}
	if (cave_wallet_hold(w, cost) != CAVE_ADMIT_OK)
		cave_die(CAVE_EX_SOFTWARE, "internal error: an admitted hold was refused");
	b->model_calls++;
	hold_add(b, span, id, w, m, cost);
	{
		jv ev = cave_event_new("budget.reserve", SRC);

		ev = jv_object_set(ev, jv_string("id"), jv_string(id));
		ev = jv_object_set(ev, jv_string("amount"), amount_jv(b->denom, cost));
		ev = jv_object_set(ev, jv_string("max_output_tokens"), jv_number((double)out));
		if (clamped >= 0)
			ev = jv_object_set(ev, jv_string("clamped_output_tokens"), jv_number((double)clamped));
		ev = jv_object_set(ev, jv_string("input_ceiling"), jv_number((double)in));
		emit(b, ev, span);
	}
	emit_state(b, w);
	if (clamped < 0) {
		cave_io_pass(&b->io, line, len);
		return;
	}
	/* the request goes on with the lowered limit, its envelope kept */
	if (rs) {
		char num[24], *s;
		size_t n;

		snprintf(num, sizeof(num), "%lld", (long long)clamped);
		s = cave_json_splice(line, len, rs->close, &rs->f[RQ_MAX_OUT], num, &n);
		cave_io_pass(&b->io, s, n);
		free(s);
		return;
	}
	cave_io_emit(&b->io, jv_object_set(jv_copy(req), jv_string("max_output_tokens"),
					   jv_number((double)clamped)));
}

/* Whether a failed attempt that reported no usage may have been billed.
 * Not when the provider answered with an error status, or was never
 * reached, or no attempt was made (a cancelled retry); otherwise (a
 * response had begun, a timeout, a cut connection) nobody knows, and
 * unknown is never zero. A retry cancelled while its attempt ran carries
 * that attempt's own code in 'cause'. */
static bool error_maybe_billed(jv ev)
{
	static const char *const unsent[] = {
		"connect_failed", "no_api_key", "bad_request", "fixture_miss",
		"fixture_bad", "retry_budget_exhausted", NULL,
	};
	jv st = jv_object_get(jv_copy(ev), jv_string("status"));
	const char *code = cave_jv_str(ev, "cause", NULL);
	bool billed = true;

	if (!code)
		code = cave_jv_str(ev, "code", "");
	if (jv_get_kind(st) == JV_KIND_NUMBER) {
		billed = jv_number_value(st) >= 200 && jv_number_value(st) < 300;
	} else if (!strncmp(code, "http_", 5)) {
		billed = false;
	} else {
		for (const char *const *u = unsent; *u; u++)
			if (!strcmp(code, *u))
				billed = false;
	}
	jv_free(st);
	return billed;
}

/* Books a failed attempt's spend (actual) while its hold stays for the
 * next attempt: the spend is taken out of the hold, then the hold is made
 * whole again, so a retry leaves only while its worst case is still
 * covered. Returns 1 on an over-report (as cave_wallet_settle); *a says
 * whether the hold is whole again (when not, h->amount is what is left). */
static int book_failed_attempt(struct hold *h, int64_t actual, enum cave_admit *a)
{
	int64_t part = actual < h->amount ? actual : h->amount;
	int breach;

	*a = CAVE_ADMIT_OK;
	if (actual <= 0)
		return 0;
	breach = cave_wallet_settle(h->w, part, actual);
	*a = cave_wallet_hold(h->w, part);
	if (*a != CAVE_ADMIT_OK)
		h->amount -= part;
	return breach;
}

/* A breaker event about call id's retries; amounts in the denomination. */
static jv retry_breaker(struct budget *b, const char *kind, const char *id, int64_t count,
			int64_t attempt, int64_t reserved, int64_t measured, const char *basis)
{
	jv ev = cave_event_new("breaker", SRC);

	ev = jv_object_set(ev, jv_string("kind"), jv_string(kind));
	ev = jv_object_set(ev, jv_string("count"), jv_number((double)count));
	ev = jv_object_set(ev, jv_string("call_id"), jv_string(id));
	ev = jv_object_set(ev, jv_string("attempt"), jv_number((double)attempt));
	ev = jv_object_set(ev, jv_string("reserved_spend"), amount_jv(b->denom, reserved));
	ev = jv_object_set(ev, jv_string("measured_spend"), amount_jv(b->denom, measured));
	return jv_object_set(ev, jv_string("spend_basis"), jv_string(basis));
}

/* cave-call will retry call h after a failed attempt (the non-final
 * call.error ev, borrowed) that cost actual on basis. Lets the retry go,
 * recorded as a retry_attempted breaker; or, when the wallet no longer
 * covers another attempt's worst case (a says why) or the retry budget
 * cannot take that worst case on top of what failed attempts have cost,
 * gives it up: a retry_exhausted breaker, a run.stop (between calls) and a
 * retry.cancel, which cave-call obeys by ending the call with a final
 * call.error retry_budget_exhausted. */
static void decide_retry(struct budget *b, struct hold *h, jv ev, int64_t actual,
			 const char *basis, enum cave_admit a)
{
	int64_t attempt = cave_jv_int(ev, "attempt", 1);
	char msg[320], x[32], y[32], z[32];
	jv out;

	if (h->cancelled)
		return; /* given up already: no further attempt starts */
	if (a == CAVE_ADMIT_OK && (b->retry_max < 0 || (b->retry_spent <= b->retry_max &&
				   h->amount <= b->retry_max - b->retry_spent))) {
		emit(b, retry_breaker(b, "retry_attempted", h->id, attempt, attempt, h->amount,
				      actual, basis), h->span);
		return;
	}
	h->cancelled = true;
	if (a != CAVE_ADMIT_OK)
		snprintf(msg, sizeof(msg), "call '%s': after attempt %lld the budget no longer "
			 "covers another attempt's worst case of %s %s; no retry", h->id,
			 (long long)attempt, fmt_amount(b->denom, h->amount, x), cave_denom_name(b->denom));
	else
		snprintf(msg, sizeof(msg), "call '%s': retry budget %s %s: failed attempts cost %s, "
			 "another attempt may cost %s; no retry after attempt %lld", h->id,
			 fmt_amount(b->denom, b->retry_max, x), cave_denom_name(b->denom),
			 fmt_amount(b->denom, b->retry_spent, y), fmt_amount(b->denom, h->amount, z),
			 (long long)attempt);
	out = retry_breaker(b, "retry_exhausted", h->id, attempt - 1, attempt, h->amount,
			    actual, basis);
	out = jv_object_set(out, jv_string("retry_spent"), amount_jv(b->denom, b->retry_spent));
	if (b->retry_max >= 0)
		out = jv_object_set(out, jv_string("retry_budget"), amount_jv(b->denom, b->retry_max));
	emit(b, out, h->span);
	/* the stop first: the head learns why before the call's final error */
	emit_stop(b, a == CAVE_ADMIT_REVOKED ? "wallet_revoked" : "budget_exhausted", h->span, msg);
	out = cave_event_new("retry.cancel", SRC);
	out = jv_object_set(out, jv_string("id"), jv_string(h->id));
	out = jv_object_set(out, jv_string("code"), jv_string("retry_budget_exhausted"));
	out = jv_object_set(out, jv_string("message"), jv_string(msg));
	emit(b, out, h->span);
}

/* A call nothing was held for (no budget, or none of the run's own): there
 * is nothing to bound, but a retry is still recorded, its amounts 0 (no
 * reservation, and no budget to measure in: its usage is in the call's
 * own events). */
static void on_error_unbudgeted(struct budget *b, jv ev)
{
	int64_t attempt = cave_jv_int(ev, "attempt", 1);
	jv u = jv_object_get(jv_copy(ev), jv_string("usage"));
	bool billed = jv_get_kind(u) == JV_KIND_OBJECT || error_maybe_billed(ev);

	jv_free(u);
	if (cave_jv_bool(ev, "final", true))
		return;
	emit(b, retry_breaker(b, "retry_attempted", cave_jv_str(ev, "id", ""), attempt, attempt, 0, 0,
			      billed ? "unavailable_worst_case" : "pre_stream_no_usage"),
	     cave_jv_str(ev, "span", NULL));
}

/* Settles the hold of a call.response or call.error (borrowed ev). A
 * failed attempt that another follows is booked beside its hold and goes
 * to decide_retry. */
static void on_outcome(struct budget *b, jv ev, bool is_error)
{
	const char *span = cave_jv_str(ev, "span", ""), *id = cave_jv_str(ev, "id", NULL);
	struct hold *h = id ? hold_find(b, span, id) : NULL;
	struct cave_usage u;
	const char *basis;
	int64_t actual, usd = -1;
	bool final = !is_error || cave_jv_bool(ev, "final", true);
	bool priced_usd = false;
	enum cave_admit a = CAVE_ADMIT_OK;
	int breach;
	jv uj, out;

	if (!h) {
		if (is_error && b->unbounded)
			on_error_unbudgeted(b, ev); /* a call of the run's own */
		return; /* not reserved here (another placement, or a lap) */
	}
	uj = jv_object_get(jv_copy(ev), jv_string("usage"));
	if (cave_usage_from_jv(uj, &u) < 0)
		memset(&u, 0, sizeof(u));
	jv_free(uj);
	if (u.available && h->m && cave_price_usage(h->m, &u, &usd) == 0)
		priced_usd = true;
	if (!u.available) {
		if (is_error && !error_maybe_billed(ev)) {
			actual = 0;
			basis = "error_no_usage";
		} else {
			actual = h->amount;
			basis = "unavailable_worst_case";
		}
	} else if (b->denom == CAVE_DENOM_TOKENS) {
		actual = u.input + u.cache_read + u.cache_write + u.output;
		basis = "provider_reported";
	} else if (priced_usd) {
		actual = usd;
		basis = "provider_reported";
	} else {
		actual = h->amount; /* a used kind has no known rate */
		basis = "unavailable_worst_case";
	}
	if (is_error && actual > 0)
		b->retry_spent = b->retry_spent > INT64_MAX - actual ? INT64_MAX
				 : b->retry_spent + actual;
	if (is_error && !final && !u.available && actual == 0) {
		/* refused before any response: nothing to book */
		decide_retry(b, h, ev, 0, "pre_stream_no_usage", a);
		return;
	}
	if (is_error && !final) {
		/* a failed attempt that may have been billed: booked beside the hold */
		breach = book_failed_attempt(h, actual, &a);
	} else {
		breach = cave_wallet_settle(h->w, h->amount, actual);
		b->settled++;
	}
	out = cave_event_new("budget.settle", SRC);
	out = jv_object_set(out, jv_string("id"), jv_string(id));
	out = jv_object_set(out, jv_string("amount"), amount_jv(b->denom, actual));
	out = jv_object_set(out, jv_string("basis"), jv_string(basis));
	out = jv_object_set(out, jv_string("reserved"), amount_jv(b->denom, h->amount));
	if (priced_usd)
		out = jv_object_set(out, jv_string("usd"), cave_usd_jv(usd));
	if (is_error && !final)
		out = jv_object_set(out, jv_string("final"), jv_false());
	if (breach)
		out = jv_object_set(out, jv_string("over_reported"), jv_true());
	emit(b, out, span);
	if (breach) {
		char x[32], y[32];

		cave_warn("call '%s': the provider reported %s, more than the %s reserved; "
			  "recorded as reported, nothing further is funded",
			  id, fmt_amount(b->denom, actual, x), fmt_amount(b->denom, h->amount, y));
	}
	emit_states_up(b, h->w);
	if (is_error && !final)
		decide_retry(b, h, ev, actual, basis, a);
	else
		hold_drop(b, h);
}

static void on_tool(struct budget *b, char *line, size_t len)
{
	cave_err e;
	jv req, ev;
	char where[64];

	if (b->tool_calls < b->max_tool_calls) {
		b->tool_calls++;
		cave_io_pass(&b->io, line, len);
		return;
	}
	snprintf(where, sizeof(where), "<stdin>:%lu", b->lineno);
	req = cave_event_parse(line, len, where, &e);
	if (!jv_is_valid(req))
		cave_die(CAVE_EX_DATA, "%s", e.msg);
	ev = cave_event_tool_unrun(cave_event_new("tool.result", SRC), req,
				   jv_string("tool_budget_exhausted"));
	learn(b, req);
	emit(b, ev, cave_jv_str(req, "span", NULL));
	jv_free(req);
}

/* A run without a budget of its own that carves a subagent's wallet gets a
 * ledger in the carve's denomination whose root is unbounded and never
 * reported: only the children's wallets bound anything. */
static const char *adopt_denomination(struct budget *b, jv ev)
{
	const char *d = cave_jv_str(ev, "denomination", NULL);
	enum cave_denom want = !d ? b->denom : strcmp(d, "usd") == 0 ? CAVE_DENOM_USD
			       : strcmp(d, "tokens") == 0 ? CAVE_DENOM_TOKENS : CAVE_DENOM_NONE;

	if (want == CAVE_DENOM_NONE)
		return "bad_request";
	if (b->ledger)
		return want == b->denom ? NULL : "denomination_mismatch";
	b->denom = want;
	b->unbounded = b->announced = true;
	b->ledger = cave_ledger_new(want, "", INT64_MAX / 4, INT64_MAX / 4);
	if (!b->ledger)
		cave_die(CAVE_EX_SOFTWARE, "cannot make the ledger");
	return NULL;
}

/* budget.carve: amount (exact, else refused), at_most (as much as is left
 * up to it) or neither (the whole remainder). */
static void on_carve(struct budget *b, jv ev)
{
	const char *child = cave_jv_str(ev, "child_span", NULL);
	const char *bad = adopt_denomination(b, ev);
	struct cave_wallet *w = b->ledger ? wallet_of(b, cave_jv_str(ev, "span", NULL)) : NULL;
	struct cave_wallet *c = NULL;
	enum cave_admit why = CAVE_ADMIT_SHORT;
	int64_t amount = -1, most = -1;
	jv v = jv_object_get(jv_copy(ev), jv_string("amount"));
	jv m = jv_object_get(jv_copy(ev), jv_string("at_most")), out;

	if (bad)
		amount = -1;
	else if (jv_get_kind(v) == JV_KIND_NUMBER)
		amount = amount_from_jv(b->denom, v, &amount) < 0 ? -1 : amount;
	else if (jv_get_kind(m) == JV_KIND_NUMBER && amount_from_jv(b->denom, m, &most) == 0)
		amount = most < cave_wallet_remaining(w) ? most : cave_wallet_remaining(w);
	else if (jv_get_kind(m) == JV_KIND_NULL || !jv_is_valid(m))
		amount = cave_wallet_remaining(w); /* the whole remainder */
	jv_free(v);
	jv_free(m);
	if (amount < 0 && !bad)
		bad = "bad_request";
	announce(b);
	if (child && amount > 0 && w)
		c = cave_wallet_carve(w, child, amount, &why);
	out = cave_event_new("budget.carve", SRC);
	out = jv_object_set(out, jv_string("child_span"), jv_string(child ? child : ""));
	out = jv_object_set(out, jv_string("denomination"), jv_string(cave_denom_name(b->denom)));
	out = jv_object_set(out, jv_string("amount"), amount_jv(b->denom, c ? amount : 0));
	if (!c)
		out = jv_object_set(out, jv_string("refused"),
				    jv_string(bad ? bad : !child ? "bad_request"
					      : why == CAVE_ADMIT_REVOKED ? "wallet_revoked"
					      : "budget_exhausted"));
	emit(b, out, w ? wallet_span(b, w) : cave_jv_str(ev, "span", NULL));
	if (c) {
		emit_state(b, c);
		emit_state(b, w);
	}
}

static void on_revoke(struct budget *b, jv ev)
{
	const char *child = cave_jv_str(ev, "child_span", NULL);
	struct cave_wallet *w = child ? cave_ledger_find(b->ledger, child) : NULL;
	jv out;

	if (!w) {
		cave_warn("revoke of unknown wallet '%s' ignored", child ? child : "");
		return;
	}
	cave_wallet_revoke(w);
	out = cave_event_new("budget.revoke", SRC);
	out = jv_object_set(out, jv_string("child_span"), jv_string(child));
	emit(b, out, wallet_span(b, w));
}

static void on_run_end(struct budget *b, jv ev)
{
	struct cave_wallet *w;
	const char *span = cave_jv_str(ev, "span", NULL);

	if (!b->ledger || !span || !(w = cave_ledger_find(b->ledger, span)))
		return;
	if (!cave_wallet_parent(w))
		return;
	cave_wallet_close(w);
	emit_states_up(b, w);
}

static jv parse_or_die(struct budget *b, const char *line, size_t len)
{
	cave_err e;
	char where[64];
	jv ev;

	snprintf(where, sizeof(where), "<stdin>:%lu", b->lineno);
	ev = cave_event_parse(line, len, where, &e);
	if (!jv_is_valid(ev))
		cave_die(CAVE_EX_DATA, "%s", e.msg);
	return ev;
}

/* A call.request without building its history: when a scan of the line
 * is sure (lib/json.h), the small object of what on_request reads, each
 * member parsed by jq from its own bytes, and *rs set; otherwise the
 * whole parse (which dies on bad input) and *rs NULL. */
static jv scan_request(struct budget *b, const char *line, size_t len,
		       struct req_scan *scan, const struct req_scan **rs)
{
	static const char *const keys[RQ_N] = {
		"system", "messages", "tools", "restorable_bytes", "max_output_tokens", "type",
		"src", "run", "span", "id", "provider", "model",
	};
	jv req = jv_object();

	for (int i = 0; i < RQ_N; i++)
		scan->f[i].key = keys[i];
	if (cave_json_scan(line, len, scan->f, RQ_N, &scan->close) < 0) {
		jv_free(req);
		*rs = NULL;
		return parse_or_die(b, line, len);
	}
	for (int i = RQ_RESTORE; i < RQ_N; i++)
		if (scan->f[i].found)
			req = jv_object_set(req, jv_string(keys[i]),
					    jv_parse_sized(scan->f[i].raw, (int)scan->f[i].raw_len));
	*rs = scan;
	return req;
}

static int on_line(void *ctx, char *line, size_t len)
{
	struct budget *b = ctx;
	struct cave_ev_head h;
	jv ev;

	b->lineno++;
	if (cave_event_peek(line, len, &h) < 0) {
		cave_io_pass(&b->io, line, len);
		return 0;
	}
	if (cave_event_src_is(&h, SRC))
		return 0; /* our own event, back from its lap */
	if (cave_event_type_is(&h, "call.request")) {
		struct req_scan scan;
		const struct req_scan *rs;

		ev = scan_request(b, line, len, &scan, &rs);
		learn(b, ev);
		on_request(b, line, len, ev, rs);
		jv_free(ev);
	} else if (cave_event_type_is(&h, "call.response") ||
		   cave_event_type_is(&h, "call.error")) {
		cave_io_pass(&b->io, line, len);
		if (b->ledger && b->nholds) {
			ev = parse_or_die(b, line, len);
			on_outcome(b, ev, cave_event_type_is(&h, "call.error"));
			jv_free(ev);
		} else if ((!b->ledger || b->unbounded) && cave_event_type_is(&h, "call.error")) {
			ev = parse_or_die(b, line, len);
			on_error_unbudgeted(b, ev);
			jv_free(ev);
		}
	} else if (cave_event_type_is(&h, "tool.request")) {
		on_tool(b, line, len);
	} else if (cave_event_type_is(&h, "run.start") || cave_event_type_is(&h, "run.end")) {
		cave_io_pass(&b->io, line, len);
		ev = parse_or_die(b, line, len);
		learn(b, ev);
		if (cave_event_type_is(&h, "run.start"))
			announce(b);
		else
			on_run_end(b, ev);
		jv_free(ev);
	} else if (cave_event_type_is(&h, "budget.release")) {
		/* only the user's control channel may release money */
		if (!cave_event_src_is(&h, "control")) {
			cave_warn("<stdin>:%lu: budget.release not from 'control' ignored", b->lineno);
			return 0;
		}
		ev = parse_or_die(b, line, len);
		learn(b, ev);
		control_release(b, ev, "control");
		jv_free(ev);
	} else if (cave_event_type_is(&h, "budget.carve") ||
		   (b->ledger && cave_event_type_is(&h, "budget.revoke"))) {
		ev = parse_or_die(b, line, len);
		learn(b, ev);
		if (cave_event_type_is(&h, "budget.carve"))
			on_carve(b, ev);
		else
			on_revoke(b, ev);
		jv_free(ev);
	} else {
		cave_io_pass(&b->io, line, len);
	}
	return 0;
}

/* ---- restore: a resumed run's ledger, rebuilt from its journal ---- */

/* A model call of the journal being restored. */
struct rcall {
	char span[17];
	char *id;
	jv req;         /* its call.request until it was reserved or answered */
	bool reserved;  /* a budget.reserve of it was journaled */
	bool over;      /* answered or refused: not in flight */
};

struct restore {
	struct budget *b;
	const char *path;
	int64_t limit;          /* bytes of the journal to fold; -1: all of it */
	int64_t at;             /* where the last line folded ends */
	unsigned long last;     /* its line number */
	bool past;              /* stopped at the limit */
	bool ended;             /* the run's own run.end is in the journal */
	bool short_hold;        /* a journaled hold does not fit the budget given now */
	struct rcall *calls;
	size_t n, cap;
};

static struct rcall *rcall_find(struct restore *s, const char *span, const char *id)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->calls[i].id, id) && !strcmp(s->calls[i].span, span))
			return &s->calls[i];
	return NULL;
}

/* The call is over (answered or refused): its request is not kept. */
static void rcall_over(struct rcall *c)
{
	if (!c)
		return;
	c->over = true;
	jv_free(c->req);
	c->req = jv_null();
}

/* The journal shows the settlement of call id (final or a failed
 * attempt's) that folding its outcome made again: it is no longer owed. */
static void stash_drop(struct budget *b, const char *span, const char *id, bool final)
{
	int n = jv_array_length(jv_copy(b->stash));

	for (int i = 0; i < n; i++) {
		jv pair = jv_array_get(jv_copy(b->stash), i);
		jv ev = jv_array_get(jv_copy(pair), 1);
		jv sp = jv_array_get(pair, 0);
		bool hit = !strcmp(jv_string_value(sp), span) &&
			   !strcmp(cave_jv_str(ev, "id", ""), id) &&
			   cave_jv_bool(ev, "final", true) == final;

		jv_free(sp);
		jv_free(ev);
		if (hit) {
			/* in two steps: the second slice consumes b->stash */
			jv head = jv_array_slice(jv_copy(b->stash), 0, i);

			b->stash = jv_array_concat(head, jv_array_slice(b->stash, i + 1, n));
			return;
		}
	}
}

/* An event cave-budget wrote in an earlier life of the run (borrowed). */
static void restore_own(struct restore *s, jv ev, const char *type, const char *span,
			const char *id)
{
	struct budget *b = s->b;
	struct rcall *c = rcall_find(s, span, id);
	uint64_t seq = (uint64_t)cave_jv_int(ev, "seq", 0);
	int64_t amount = -1;
	jv v = jv_object_get(jv_copy(ev), jv_string("amount"));

	if (seq > b->em.seq)
		b->em.seq = seq; /* one line per (src, seq), across lives */
	if (b->ledger && amount_from_jv(b->denom, v, &amount) < 0)
		amount = -1;
	jv_free(v);
	if (!strcmp(type, "budget.state")) {
		const char *d = cave_jv_str(ev, "denomination", "none");

		if (b->ledger && !b->unbounded && strcmp(d, cave_denom_name(b->denom)))
			cave_die(CAVE_EX_USAGE, "--restore: '%s' keeps a budget in %s, not %s",
				 s->path, d, cave_denom_name(b->denom));
	} else if (!strcmp(type, "budget.reserve")) {
		if (b->ledger && amount >= 0) {
			struct cave_wallet *w = wallet_of(b, span);
			const struct cave_model *m = NULL;

			if (c && jv_get_kind(c->req) == JV_KIND_OBJECT)
				m = cave_catalog_find(b->cat, cave_jv_str(c->req, "provider", ""),
						      cave_jv_str(c->req, "model", ""));
			if (cave_wallet_hold(w, amount) != CAVE_ADMIT_OK)
				s->short_hold = true; /* kept beside the wallet; it settles there */
			hold_add(b, span, id, w, m, amount);
			b->model_calls++;
		}
		if (c) {
			c->reserved = true;
			jv_free(c->req);
			c->req = jv_null();
		}
	} else if (!strcmp(type, "budget.settle")) {
		struct hold *h = hold_find(b, span, id);

		if (cave_jv_bool(ev, "restored", false) &&
		    !strcmp(cave_jv_str(ev, "basis", ""), "unknown_worst_case")) {
			/* an earlier resume booked this call in flight */
			if (h && amount >= 0) {
				cave_wallet_settle(h->w, h->amount, amount);
				b->settled++;
				hold_drop(b, h);
			}
		} else {
			stash_drop(b, span, id, cave_jv_bool(ev, "final", true));
		}
	} else if (!strcmp(type, "budget.release")) {
		if (b->ledger && amount > 0)
			apply_release(b, amount, cave_jv_str(ev, "reason", NULL),
				      cave_jv_str(ev, "source", "control"));
	} else if (!strcmp(type, "budget.carve")) {
		const char *child = cave_jv_str(ev, "child_span", NULL);
		enum cave_admit why;

		if (cave_jv_str(ev, "refused", NULL) || !child)
			return;
		if (!b->ledger)
			adopt_denomination(b, ev);
		v = jv_object_get(jv_copy(ev), jv_string("amount"));
		if (!b->ledger || amount_from_jv(b->denom, v, &amount) < 0)
			amount = -1;
		jv_free(v);
		if (amount > 0 && !cave_wallet_carve(wallet_of(b, span), child, amount, &why))
			cave_warn("--restore: the wallet of '%s' no longer fits the budget given now",
				  child);
	} else if (!strcmp(type, "budget.revoke")) {
		struct cave_wallet *w = b->ledger ? cave_ledger_find(b->ledger,
								     cave_jv_str(ev, "child_span", "")) : NULL;

		if (w)
			cave_wallet_revoke(w);
	} else if (!strcmp(type, "call.error")) {
		rcall_over(c); /* a refusal */
	} else if (!strcmp(type, "run.stop")) {
		static char why[32];

		/* the request it stopped was never sent */
		for (size_t i = 0; i < s->n; i++)
			if (!s->calls[i].over && !s->calls[i].reserved && !strcmp(s->calls[i].span, span))
				rcall_over(&s->calls[i]);
		if (!*span || !strcmp(span, b->root_span)) { /* as emit_stop: it stays stopped */
			snprintf(why, sizeof(why), "%s", cave_jv_str(ev, "reason", "budget_exhausted"));
			b->stopped = why;
		}
	}
}

/* An event another member or the head wrote (borrowed): what cave-budget
 * did when it passed, done again without a word. */
static void restore_other(struct restore *s, jv ev, const char *type, const char *span,
			  const char *id)
{
	struct budget *b = s->b;
	struct rcall *c = rcall_find(s, span, id);
	struct hold *h;
	bool is_error = !strcmp(type, "call.error");

	if (!strcmp(type, "call.request") && *id && !c) {
		if (s->n == s->cap) {
			s->cap = s->cap ? s->cap * 2 : 16;
			s->calls = cave_xrealloc(s->calls, s->cap * sizeof(*s->calls));
		}
		c = &s->calls[s->n++];
		memset(c, 0, sizeof(*c));
		snprintf(c->span, sizeof(c->span), "%s", span);
		c->id = cave_xstrdup(id);
		c->req = jv_copy(ev);
		if ((h = hold_find(b, span, id))) {
			/* reserved before its request reached the journal (a
			 * journal written in a straight pipe): priced now */
			h->m = cave_catalog_find(b->cat, cave_jv_str(ev, "provider", ""),
						 cave_jv_str(ev, "model", ""));
			c->reserved = true;
			jv_free(c->req);
			c->req = jv_null();
		}
		if ((!b->ledger || (b->unbounded && !cave_wallet_parent(wallet_of(b, span)))) &&
		    b->model_calls < b->max_model_calls)
			b->model_calls++; /* passed without a hold */
	} else if (!strcmp(type, "call.response") || is_error) {
		if (!is_error || cave_jv_bool(ev, "final", true))
			rcall_over(c);
		if (b->ledger)
			on_outcome(b, ev, is_error);
	} else if (!strcmp(type, "tool.request")) {
		if (b->tool_calls < b->max_tool_calls)
			b->tool_calls++;
	} else if (!strcmp(type, "run.end")) {
		if (!strcmp(span, b->root_span))
			s->ended = true;
		else if (b->ledger)
			on_run_end(b, ev);
	}
}

static int restore_line(void *ctx, char *line, size_t len, unsigned long lineno)
{
	struct restore *s = ctx;
	char where[512];
	cave_err e;
	jv ev;

	/* lines skipped before this one were empty: one byte each */
	s->at += (int64_t)(lineno - s->last - 1) + (int64_t)len + 1;
	s->last = lineno;
	if (s->limit >= 0 && s->at > s->limit) {
		s->past = true;
		return -1;
	}
	snprintf(where, sizeof(where), "%.400s:%lu", s->path, lineno);
	ev = cave_event_parse(line, len, where, &e);
	if (!jv_is_valid(ev)) {
		cave_warn("%s", e.msg); /* as the head does: the rest still counts */
		jv_free(ev);
		return 0;
	}
	learn(s->b, ev);
	if (!strcmp(cave_jv_str(ev, "src", ""), SRC))
		restore_own(s, ev, cave_jv_str(ev, "type", ""), cave_jv_str(ev, "span", ""),
			    cave_jv_str(ev, "id", ""));
	else
		restore_other(s, ev, cave_jv_str(ev, "type", ""), cave_jv_str(ev, "span", ""),
			      cave_jv_str(ev, "id", ""));
	jv_free(ev);
	return 0;
}

/* A call.request the journal shows going into the ring with no reservation
 * or refusal after it: the crash came before those reached the journal,
 * and it may have left. Holds what on_request would have held (nothing
 * when it would have been refused) and says so. */
static void restore_admit(struct budget *b, struct rcall *c)
{
	jv req = c->req;
	const struct cave_model *m = cave_catalog_find(b->cat, cave_jv_str(req, "provider", ""),
						       cave_jv_str(req, "model", ""));
	struct cave_wallet *w = wallet_of(b, c->span);
	int64_t in, out, cost, k = -1;
	jv ev;

	if (b->stopped || b->model_calls >= b->max_model_calls ||
	    (b->denom == CAVE_DENOM_USD && (!m || !m->priced)))
		return;
	in = cave_reserve_input_ceiling(req, m);
	out = cave_reserve_output_allowance(req, m);
	if (out < 0 || cave_reserve_cost(b->denom, m, in, out, &cost) < 0)
		return;
	if (cave_wallet_check(w, cost) != CAVE_ADMIT_OK) {
		if (cave_wallet_check(w, cost) != CAVE_ADMIT_SHORT)
			return;
		k = cave_reserve_afford_output(b->denom, m, in, cave_wallet_remaining(w));
		if (k < b->floor || k >= out || cave_reserve_cost(b->denom, m, in, k, &cost) < 0 ||
		    cave_wallet_check(w, cost) != CAVE_ADMIT_OK)
			return;
	}
	cave_wallet_hold(w, cost);
	b->model_calls++;
	hold_add(b, c->span, c->id, w, m, cost);
	ev = cave_event_new("budget.reserve", SRC);
	ev = jv_object_set(ev, jv_string("id"), jv_string(c->id));
	ev = jv_object_set(ev, jv_string("amount"), amount_jv(b->denom, cost));
	ev = jv_object_set(ev, jv_string("max_output_tokens"), jv_number((double)out));
	if (k >= 0)
		ev = jv_object_set(ev, jv_string("clamped_output_tokens"), jv_number((double)k));
	ev = jv_object_set(ev, jv_string("input_ceiling"), jv_number((double)in));
	ev = jv_object_set(ev, jv_string("restored"), jv_true());
	emit(b, ev, c->span);
}

/* --restore: folds the first limit bytes (-1: all) of a resumed run's
 * journal into this ledger, as if this process had seen them: the budget's
 * tranches, carves, holds and settlements, the model and tool calls
 * counted, a stop of the run, the event counter. A call in flight at the crash (held, never
 * answered) may have been billed: its hold is booked as spent, and a
 * budget.settle with basis unknown_worst_case and restored true says so.
 * Dies on a journal it cannot read or a budget in another denomination. */
static void restore(struct budget *b, const char *path, int64_t limit)
{
	struct restore s = { .b = b, .path = path, .limit = limit };
	struct cave_wallet_state st;
	size_t booked = 0, booked_known = 0;
	cave_err e;
	jv stash;

	b->stash = jv_array();
	b->replaying = true;
	if (cave_journal_read(path, restore_line, &s, &e) < 0 && !s.past)
		cave_die(strcmp(e.code, "io") ? CAVE_EX_DATA : CAVE_EX_IO, "--restore: %s", e.msg);
	b->replaying = false;
	b->announced = true;
	/* settlements of outcomes the journal has but whose budget.settle the
	 * crash kept out of it: said now (after a run.end too: the receipt
	 * folds what comes after it) */
	stash = b->stash;
	b->stash = jv_invalid();
	jv_array_foreach(stash, k, pair) {
		jv sp = jv_array_get(jv_copy(pair), 0);
		jv ev = jv_array_get(pair, 1);

		(void)k;
		emit(b, jv_object_set(ev, jv_string("restored"), jv_true()), jv_string_value(sp));
		if (b->ledger)
			emit_states_up(b, wallet_of(b, jv_string_value(sp)));
		booked_known++;
		jv_free(sp);
	}
	jv_free(stash);
	if (s.short_hold)
		cave_warn("--restore: the calls held in '%s' pass the budget given now", path);
	for (size_t i = 0; i < s.n && b->ledger; i++) {
		struct rcall *c = &s.calls[i];

		if (!c->over && !c->reserved && jv_get_kind(c->req) == JV_KIND_OBJECT &&
		    !(b->unbounded && !cave_wallet_parent(wallet_of(b, c->span))))
			restore_admit(b, c);
	}
	/* what is still held was in flight when the run died */
	for (size_t i = b->nholds; i-- > 0;) {
		struct hold *h = &b->holds[i];
		struct cave_wallet *w = h->w;
		jv out = cave_event_new("budget.settle", SRC);
		int breach = cave_wallet_settle(w, h->amount, h->amount);

		b->settled++;
		out = jv_object_set(out, jv_string("id"), jv_string(h->id));
		out = jv_object_set(out, jv_string("amount"), amount_jv(b->denom, h->amount));
		out = jv_object_set(out, jv_string("basis"), jv_string("unknown_worst_case"));
		out = jv_object_set(out, jv_string("reserved"), amount_jv(b->denom, h->amount));
		out = jv_object_set(out, jv_string("restored"), jv_true());
		if (breach)
			out = jv_object_set(out, jv_string("over_reported"), jv_true());
		emit(b, out, h->span);
		emit_states_up(b, w);
		hold_drop(b, h);
		booked++;
	}
	if (b->ledger && !s.ended && !booked && !booked_known)
		emit_state(b, cave_ledger_root(b->ledger));
	if (b->ledger && booked) {
		char x[32];

		cave_wallet_state(cave_ledger_root(b->ledger), &st);
		cave_warn("--restore: %zu call%s in flight at the crash may have been billed: "
			  "booked at the worst case held; spent %s", booked, booked == 1 ? "" : "s",
			  fmt_amount(b->denom, st.spent, x));
	}
	for (size_t i = 0; i < s.n; i++) {
		free(s.calls[i].id);
		jv_free(s.calls[i].req);
	}
	free(s.calls);
}

/* Reads what the control FIFO has; each whole line may be a budget.release. */
static void read_control(struct budget *b)
{
	char chunk[4096];
	ssize_t r;

	while ((r = read(b->control_fd, chunk, sizeof(chunk))) > 0) {
		char *nl;

		if (cave_buf_add(&b->control_in, chunk, (size_t)r) < 0) {
			cave_warn("control: line longer than %zu bytes dropped", CONTROL_LINE_MAX);
			cave_buf_reset(&b->control_in);
			continue;
		}
		while ((nl = memchr(b->control_in.data, '\n', b->control_in.len))) {
			size_t n = (size_t)(nl - b->control_in.data);
			struct cave_ev_head h;
			cave_err e;

			*nl = '\0';
			if (n && cave_event_peek(b->control_in.data, n, &h) == 0 &&
			    cave_event_type_is(&h, "budget.release")) {
				jv ev = cave_event_parse(b->control_in.data, n, "control", &e);

				if (jv_is_valid(ev))
					control_release(b, ev, "control");
				else
					cave_warn("%s", e.msg);
				jv_free(ev);
			} else if (n) {
				cave_warn("control: only budget.release events are read; line ignored");
			}
			cave_buf_consume(&b->control_in, n + 1);
		}
	}
}

static int loop(struct budget *b, cave_err *e)
{
	struct pollfd p[3];

	while (!cave_io_done(&b->io)) {
		int n = cave_io_pollfds(&b->io, p), c = n;

		if (b->control_fd >= 0) {
			p[c].fd = b->control_fd;
			p[c].events = POLLIN;
			p[c++].revents = 0;
		}
		if (n == 0)
			break;
		if (poll(p, (nfds_t)c, -1) < 0) {
			if (errno == EINTR)
				continue;
			return cave_errf(e, "io", "poll failed: %s", strerror(errno));
		}
		/* releases that arrived first are applied before the next lines */
		if (c > n && p[n].revents)
			read_control(b);
		if (cave_io_service(&b->io, p, n, on_line, b, e) < 0)
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	enum { O_MAX_USD = 256, O_MAX_TOKENS, O_MAX_COST, O_INIT_USD, O_INIT_TOKENS,
	       O_FLOOR, O_MODEL_CALLS, O_TOOL_CALLS, O_DEADLINE, O_CONTROL, O_HOOK,
	       O_CATALOG, O_RETRY_USD, O_RETRY_TOKENS, O_RESTORE, O_RESTORE_BYTES };
	static const struct option opts[] = {
		{ "max-usd", required_argument, NULL, O_MAX_USD },
		{ "max-tokens", required_argument, NULL, O_MAX_TOKENS },
		{ "max-cost-usd", required_argument, NULL, O_MAX_COST },
		{ "initial-usd", required_argument, NULL, O_INIT_USD },
		{ "initial-tokens", required_argument, NULL, O_INIT_TOKENS },
		{ "output-floor", required_argument, NULL, O_FLOOR },
		{ "max-model-calls", required_argument, NULL, O_MODEL_CALLS },
		{ "max-tool-calls", required_argument, NULL, O_TOOL_CALLS },
		{ "deadline-ms", required_argument, NULL, O_DEADLINE },
		{ "control", required_argument, NULL, O_CONTROL },
		{ "on-exhausted", required_argument, NULL, O_HOOK },
		{ "catalog", required_argument, NULL, O_CATALOG },
		{ "max-retry-usd", required_argument, NULL, O_RETRY_USD },
		{ "max-retry-tokens", required_argument, NULL, O_RETRY_TOKENS },
		{ "restore", required_argument, NULL, O_RESTORE },
		{ "restore-bytes", required_argument, NULL, O_RESTORE_BYTES },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct budget b;
	const char *max_s = NULL, *init_s = NULL, *control = NULL, *catalog = NULL;
	const char *retry_s = NULL, *restore_s = NULL;
	long restore_bytes = -1;
	int nbudgets = 0, opt, ret;
	enum cave_denom init_d = CAVE_DENOM_NONE, retry_d = CAVE_DENOM_NONE;
	cave_err e;

	cave_set_prog(argv[0]);
	memset(&b, 0, sizeof(b));
	b.floor = 256;
	b.max_model_calls = 64;
	b.max_tool_calls = 64;
	b.deadline_ms = -1;
	b.control_fd = -1;
	b.retry_max = -1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case O_MAX_USD: b.denom = CAVE_DENOM_USD; max_s = optarg; nbudgets++; break;
		case O_MAX_TOKENS: b.denom = CAVE_DENOM_TOKENS; max_s = optarg; nbudgets++; break;
		case O_MAX_COST: b.denom = CAVE_DENOM_USD; b.cost_cap = true; max_s = optarg; nbudgets++; break;
		case O_INIT_USD: init_d = CAVE_DENOM_USD; init_s = optarg; break;
		case O_INIT_TOKENS: init_d = CAVE_DENOM_TOKENS; init_s = optarg; break;
		case O_FLOOR: b.floor = parse_long("--output-floor", optarg); break;
		case O_MODEL_CALLS: b.max_model_calls = parse_long("--max-model-calls", optarg); break;
		case O_TOOL_CALLS: b.max_tool_calls = parse_long("--max-tool-calls", optarg); break;
		case O_DEADLINE: b.deadline_ms = parse_long("--deadline-ms", optarg); break;
		case O_CONTROL: control = optarg; break;
		case O_HOOK: b.hook = optarg; break;
		case O_CATALOG: catalog = optarg; break;
		case O_RETRY_USD: retry_d = CAVE_DENOM_USD; retry_s = optarg; break;
		case O_RETRY_TOKENS: retry_d = CAVE_DENOM_TOKENS; retry_s = optarg; break;
		case O_RESTORE: restore_s = optarg; break;
		case O_RESTORE_BYTES: restore_bytes = parse_long("--restore-bytes", optarg); break;
		case 'h': usage(0); break;
		default: usage(CAVE_EX_USAGE);
		}
	}
	if (optind < argc)
		usage(CAVE_EX_USAGE);
	if (restore_bytes >= 0 && !restore_s)
		cave_die(CAVE_EX_USAGE, "--restore-bytes needs --restore");
	if (nbudgets > 1)
		cave_die(CAVE_EX_USAGE, b.cost_cap ? "--max-cost-usd cannot be combined with a budget"
			 : "give exactly one of --max-usd and --max-tokens");
	if (init_s && (b.denom != init_d || b.cost_cap))
		cave_die(CAVE_EX_USAGE, "%s needs %s", init_d == CAVE_DENOM_USD ? "--initial-usd"
			 : "--initial-tokens", init_d == CAVE_DENOM_USD ? "--max-usd" : "--max-tokens");
	if (retry_s && (!max_s || b.denom != retry_d))
		cave_die(CAVE_EX_USAGE, "%s needs %s", retry_d == CAVE_DENOM_USD ? "--max-retry-usd"
			 : "--max-retry-tokens", retry_d == CAVE_DENOM_USD ? "--max-usd or --max-cost-usd"
			 : "--max-tokens");
	if (retry_s)
		b.retry_max = parse_amount(retry_d == CAVE_DENOM_USD ? "--max-retry-usd"
					   : "--max-retry-tokens", retry_d, retry_s);
	if ((control || b.hook) && (!max_s || b.cost_cap))
		cave_die(CAVE_EX_USAGE, "--control and --on-exhausted need --max-usd or --max-tokens");
	if (max_s) {
		int64_t max = parse_amount(b.cost_cap ? "--max-cost-usd" : b.denom == CAVE_DENOM_USD
					   ? "--max-usd" : "--max-tokens", b.denom, max_s);
		int64_t init = init_s ? parse_amount(init_d == CAVE_DENOM_USD ? "--initial-usd"
						     : "--initial-tokens", init_d, init_s) : max;

		if (init > max)
			cave_die(CAVE_EX_USAGE, "the initial tranche is larger than the budget");
		b.ledger = cave_ledger_new(b.denom, "", max, init);
		if (!b.ledger)
			cave_die(CAVE_EX_SOFTWARE, "cannot make the ledger");
	}
	/* a USD budget cannot run without prices; otherwise prices only add
	 * context-window caps and USD estimates */
	b.cat = cave_catalog_load(catalog, &e);
	if (!b.cat && (b.denom == CAVE_DENOM_USD || catalog))
		cave_die(CAVE_EX_CONFIG, "%s", e.msg);
	if (control) {
		/* read-write, so the FIFO never reads as ended between writers */
		b.control_fd = open(control, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		if (b.control_fd < 0)
			cave_die(CAVE_EX_IO, "cannot open '%s':", control);
		cave_buf_init(&b.control_in, CONTROL_LINE_MAX);
	}
	clock_gettime(CLOCK_MONOTONIC, &b.t0);
	cave_emitter_init(&b.em, SRC);
	cave_io_init(&b.io, 0, 1);
	if (restore_s)
		restore(&b, restore_s, restore_bytes);
	ret = loop(&b, &e);
	if (ret < 0)
		cave_warn("%s", e.msg);
	cave_io_drain(&b.io);
	ret = ret < 0 ? (b.io.error ? CAVE_EX_IO : CAVE_EX_DATA) : b.exit_code;
	for (size_t i = 0; i < b.nholds; i++)
		free(b.holds[i].id);
	free(b.holds);
	cave_io_free(&b.io);
	cave_buf_free(&b.control_in);
	if (b.control_fd >= 0)
		close(b.control_fd);
	cave_ledger_free(b.ledger);
	cave_catalog_free(b.cat);
	if (cave_close_stdout() && !ret)
		ret = CAVE_EX_IO;
	return ret;
}

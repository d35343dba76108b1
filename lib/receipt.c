/* receipt.c: the receipt fold (see receipt.h). Owns the mapping from events
 * to the contract's fields and the exact money sum (integer pico-USD,
 * converted to a JSON number once). It must never copy text, prompts or
 * tool output into the receipt, and never price an unknown model as $0. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "event.h"
#include "proto.h"
#include "receipt.h"

#define PICO_PER_USD 1e12

/* One model call id: what its request, reservation and outcome said. */
struct rcall {
	char *id;
	char *provider, *model;   /* from call.request, for a bare response */
	bool requested;
	bool done;                /* a call.response or final call.error came */
	bool reserved;
	double reserve_amount;    /* worst case, in the budget's denomination */
	bool clamped;
	int64_t clamp;            /* clamped_output_tokens */
};

/* One entry of calls[]: a response, or an error that carried usage. */
struct rline {
	char *provider, *model;
	struct cave_usage u;      /* u.available false: usage unavailable */
	size_t call;              /* index into calls (its reservation) */
};

struct rtool {
	char *name;
	int64_t calls, errors;
};

/* A subagent: events under another span, or the receipt it sent. */
struct rchild {
	char *span;
	struct cave_receipt *fold; /* NULL until one of its events came */
	jv receipt;                /* its own receipt event's object, or null */
};

struct cave_receipt {
	const struct cave_catalog *cat;
	char run[37];
	bool run_known, run_from_start;
	char *root_span;           /* set by the first run.start only */
	char *first_span;          /* the first folded event's */
	char *agent;
	char stop[32];
	bool stop_from_end;
	jv budget;                 /* the last budget.state, or null */
	struct rcall *calls;
	size_t ncalls, capcalls;
	struct rline *lines;
	size_t nlines, caplines;
	struct rtool *tools;
	size_t ntools, captools;
	struct rchild *kids;
	size_t nkids, capkids;
	jv route;                  /* span -> the direct child it is under */
	jv tranches, breakers, compactions;
};

static const char *const stop_reasons[] = {
	"complete", "budget_exhausted", "deadline", "loop_detected",
	"no_progress", "wallet_revoked", "call_budget_exhausted", NULL,
};
static const char *const breaker_kinds[] = {
	"loop_detected", "no_progress", "fan_out_blocked", "retry_attempted",
	"retry_exhausted", NULL,
};
static const char *const spend_bases[] = {
	"pre_stream_no_usage", "provider_reported", "unavailable_worst_case", NULL,
};
static const char *const wanted[] = {
	"run.start", "run.end", "run.stop", "call.request", "call.response",
	"call.error", "budget.state", "budget.reserve", "budget.release",
	"tool.result", "breaker", "compaction", "receipt", NULL,
};

static bool in_list(const char *const *list, const char *s)
{
	for (; s && *list; list++)
		if (strcmp(*list, s) == 0)
			return true;
	return false;
}

bool cave_receipt_wants(const char *type, size_t type_len)
{
	for (const char *const *w = wanted; *w; w++)
		if (strlen(*w) == type_len && memcmp(*w, type, type_len) == 0)
			return true;
	return false;
}

/* Records the first problem of an event in e; the fold goes on. */
__attribute__((format(printf, 3, 4)))
static void note(cave_err *e, int *bad, const char *fmt, ...)
{
	va_list ap;

	if (*bad || !e) {
		*bad = 1;
		return;
	}
	*bad = 1;
	snprintf(e->code, sizeof e->code, "%s", "bad_event");
	e->retryable = 0;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	for (char *p = e->msg; *p; p++) /* one line, whatever an event held */
		if (*p == '\n' || *p == '\r')
			*p = ' ';
}

/* A member of o (borrowed), or jv_invalid when absent. Returns a new jv. */
static jv get(jv o, const char *k)
{
	if (jv_get_kind(o) != JV_KIND_OBJECT)
		return jv_invalid();
	return jv_object_get(jv_copy(o), jv_string(k));
}

/* Same, trying the snake_case key first, then the camelCase one. */
static jv get2(jv o, const char *snake, const char *camel)
{
	jv v = get(o, snake);

	if (jv_is_valid(v) || !camel)
		return v;
	jv_free(v);
	return get(o, camel);
}

/* Sets o[k] = v; consumes o and v, returns the object. */
static jv set(jv o, const char *k, jv v)
{
	return jv_object_set(o, jv_string(k), v);
}

static bool absent(jv v)
{
	return !jv_is_valid(v) || jv_get_kind(v) == JV_KIND_NULL;
}

/* A non-negative integer member: 1 found, 0 absent or null, -1 wrong. */
static int get_count(jv o, const char *snake, const char *camel, int64_t *out)
{
	jv v = get2(o, snake, camel);
	int ret = -1;
	double d;

	if (absent(v)) {
		ret = 0;
		goto out;
	}
	if (jv_get_kind(v) != JV_KIND_NUMBER)
		goto out;
	d = jv_number_value(v);
	if (!(d >= 0) || d != floor(d) || d > 9007199254740992.0)
		goto out;
	*out = (int64_t)d;
	ret = 1;
out:
	jv_free(v);
	return ret;
}

/* A non-negative number member (consumed into *out as a new jv). */
static int get_amount(jv o, const char *snake, const char *camel, jv *out)
{
	jv v = get2(o, snake, camel);

	if (absent(v)) {
		jv_free(v);
		return 0;
	}
	if (jv_get_kind(v) != JV_KIND_NUMBER || !(jv_number_value(v) >= 0)) {
		jv_free(v);
		return -1;
	}
	*out = v;
	return 1;
}

/* A string member copied into a heap string, or NULL when not a string. */
static char *dup_str(jv o, const char *snake, const char *camel)
{
	jv v = get2(o, snake, camel);
	char *s = NULL;

	if (jv_is_valid(v) && jv_get_kind(v) == JV_KIND_STRING &&
	    jv_string_length_bytes(jv_copy(v)) > 0)
		s = cave_xstrdup(jv_string_value(v));
	jv_free(v);
	return s;
}

static bool is_uuid(const char *s)
{
	static const char shape[] = "xxxxxxxx-xxxx-Vxxx-Nxxx-xxxxxxxxxxxx";
	size_t i;

	if (!s || strlen(s) != sizeof shape - 1)
		return false;
	for (i = 0; shape[i]; i++) {
		char c = s[i];
		bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');

		if (shape[i] == '-' ? c != '-' : !hex)
			return false;
		if (shape[i] == 'V' && (c < '1' || c > '8'))
			return false;
		if (shape[i] == 'N' && !strchr("89ab", c))
			return false;
	}
	return true;
}

static bool is_sha256(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return i == 64;
}

/* Grows an array of n elements of size sz to room for one more. */
static void *grow(void *p, size_t n, size_t *cap, size_t sz)
{
	if (n < *cap)
		return p;
	*cap = *cap ? *cap * 2 : 8;
	return cave_xrealloc(p, *cap * sz);
}

struct cave_receipt *cave_receipt_new(const struct cave_catalog *cat)
{
	struct cave_receipt *r = cave_xcalloc(1, sizeof *r);

	r->cat = cat;
	cave_uuid4(r->run); /* stands until an event names the run */
	snprintf(r->stop, sizeof r->stop, "%s", "complete");
	r->budget = jv_null();
	r->tranches = jv_array();
	r->breakers = jv_array();
	r->compactions = jv_array();
	r->route = jv_object();
	return r;
}

void cave_receipt_free(struct cave_receipt *r)
{
	size_t i;

	if (!r)
		return;
	for (i = 0; i < r->ncalls; i++) {
		free(r->calls[i].id);
		free(r->calls[i].provider);
		free(r->calls[i].model);
	}
	for (i = 0; i < r->nlines; i++) {
		free(r->lines[i].provider);
		free(r->lines[i].model);
	}
	for (i = 0; i < r->ntools; i++)
		free(r->tools[i].name);
	for (i = 0; i < r->nkids; i++) {
		free(r->kids[i].span);
		cave_receipt_free(r->kids[i].fold);
		jv_free(r->kids[i].receipt);
	}
	free(r->calls);
	free(r->lines);
	free(r->tools);
	free(r->kids);
	jv_free(r->route);
	free(r->root_span);
	free(r->first_span);
	free(r->agent);
	jv_free(r->budget);
	jv_free(r->tranches);
	jv_free(r->breakers);
	jv_free(r->compactions);
	free(r);
}

/* The call with this id, made when new; NULL id gets an anonymous one. */
static struct rcall *call_for(struct cave_receipt *r, const char *id)
{
	struct rcall *c;
	size_t i;

	for (i = 0; id && i < r->ncalls; i++)
		if (r->calls[i].id && strcmp(r->calls[i].id, id) == 0)
			return &r->calls[i];
	r->calls = grow(r->calls, r->ncalls, &r->capcalls, sizeof *r->calls);
	c = &r->calls[r->ncalls++];
	memset(c, 0, sizeof *c);
	c->id = id ? cave_xstrdup(id) : NULL;
	return c;
}

static struct rchild *kid_for(struct cave_receipt *r, const char *span)
{
	struct rchild *k;
	size_t i;

	for (i = 0; i < r->nkids; i++)
		if (strcmp(r->kids[i].span, span) == 0)
			return &r->kids[i];
	r->kids = grow(r->kids, r->nkids, &r->capkids, sizeof *r->kids);
	k = &r->kids[r->nkids++];
	k->span = cave_xstrdup(span);
	k->fold = NULL;
	k->receipt = jv_null();
	return k;
}

/* The direct child of this run that span belongs to: a run.start naming a
 * parent_span places its span (and so a grandchild's events) in the tree;
 * an unplaced span is a direct child. Returns a copy. */
static char *kid_span(struct cave_receipt *r, jv ev, const char *type, const char *span)
{
	jv top = jv_object_get(jv_copy(r->route), jv_string(span));
	char *parent = strcmp(type, "run.start") == 0 ? dup_str(ev, "parent_span", NULL) : NULL;
	char *out;

	if (jv_get_kind(top) != JV_KIND_STRING && parent && strcmp(parent, r->root_span) != 0) {
		jv_free(top);
		top = jv_object_get(jv_copy(r->route), jv_string(parent));
		if (jv_get_kind(top) != JV_KIND_STRING) {
			jv_free(top);
			top = jv_string(parent);
		}
	}
	if (jv_get_kind(top) != JV_KIND_STRING) {
		jv_free(top);
		top = jv_string(span);
	}
	r->route = jv_object_set(r->route, jv_string(span), jv_copy(top));
	out = cave_xstrdup(jv_string_value(top));
	jv_free(top);
	free(parent);
	return out;
}

static void fold_run_start(struct cave_receipt *r, jv ev, const char *run,
			   const char *span, cave_err *e, int *bad)
{
	char *agent = dup_str(ev, "agent", NULL);

	if (!r->root_span && span)
		r->root_span = cave_xstrdup(span);
	if (run && !r->run_from_start) {
		if (is_uuid(run)) {
			snprintf(r->run, sizeof r->run, "%s", run);
			r->run_known = r->run_from_start = true;
		} else {
			note(e, bad, "run.start: 'run' is not a UUID");
		}
	}
	if (agent) {
		free(r->agent);
		r->agent = agent;
	}
}

static void fold_stop(struct cave_receipt *r, jv ev, bool end, cave_err *e,
		      int *bad)
{
	char *why = dup_str(ev, "stop_reason", "reason");

	if (!why) {
		if (!end)
			note(e, bad, "run.stop: no 'reason'");
		return;
	}
	if (!in_list(stop_reasons, why))
		note(e, bad, "%s: stop reason '%.60s' is not one the receipt knows",
		     end ? "run.end" : "run.stop", why);
	else if (end || !r->stop_from_end) {
		snprintf(r->stop, sizeof r->stop, "%s", why);
		r->stop_from_end = end;
	}
	free(why);
}

/* A call.response, or a call.error carrying usage: one entry of calls[]. */
static void add_line(struct cave_receipt *r, struct rcall *c, jv ev,
		     const char *what, cave_err *e, int *bad)
{
	struct rline *l;
	jv usage = get(ev, "usage");
	char *basis = dup_str(ev, "usage_basis", NULL);

	r->lines = grow(r->lines, r->nlines, &r->caplines, sizeof *r->lines);
	l = &r->lines[r->nlines++];
	memset(l, 0, sizeof *l);
	l->call = (size_t)(c - r->calls);
	l->provider = dup_str(ev, "provider", NULL);
	l->model = dup_str(ev, "model", NULL);
	if (!l->provider && c->provider)
		l->provider = cave_xstrdup(c->provider);
	if (!l->model && c->model)
		l->model = cave_xstrdup(c->model);
	if (!l->provider || !l->model) {
		note(e, bad, "%s: no 'provider' or 'model'", what);
		if (!l->provider)
			l->provider = cave_xstrdup("unknown");
		if (!l->model)
			l->model = cave_xstrdup("unknown");
	}
	if (basis && strcmp(basis, "provider_reported") != 0 &&
	    strcmp(basis, "unavailable") != 0)
		note(e, bad, "%s: unknown usage_basis '%.60s'", what, basis);
	if ((basis && strcmp(basis, "unavailable") == 0) || absent(usage))
		goto out;
	if (jv_get_kind(usage) != JV_KIND_OBJECT ||
	    cave_usage_from_jv(usage, &l->u) < 0 /* borrows */) {
		note(e, bad, "%s: 'usage' is not a usage object", what);
		memset(&l->u, 0, sizeof l->u);
		goto out;
	}
	l->u.available = true;
out:
	if (!l->u.available)
		memset(&l->u, 0, sizeof l->u);
	free(basis);
	jv_free(usage);
}

static void fold_call(struct cave_receipt *r, jv ev, const char *type,
		      cave_err *e, int *bad)
{
	char *id = dup_str(ev, "id", NULL);
	struct rcall *c;

	if (!id)
		note(e, bad, "%s: no 'id'", type);
	c = call_for(r, id);
	if (strcmp(type, "call.request") == 0) {
		c->requested = true;
		if (!c->provider)
			c->provider = dup_str(ev, "provider", NULL);
		if (!c->model)
			c->model = dup_str(ev, "model", NULL);
	} else if (strcmp(type, "call.response") == 0) {
		if (c->done && id)
			note(e, bad, "call.response: a second outcome for call '%.60s'", id);
		else
			add_line(r, c, ev, type, e, bad);
		c->done = true;
	} else { /* call.error: final unless it says another attempt follows */
		jv usage = get(ev, "usage");
		jv final = get(ev, "final");

		if (!absent(usage))
			add_line(r, c, ev, type, e, bad);
		if (jv_get_kind(final) != JV_KIND_FALSE)
			c->done = true;
		jv_free(usage);
		jv_free(final);
	}
	free(id);
}

static void fold_reserve(struct cave_receipt *r, jv ev, cave_err *e, int *bad)
{
	char *id = dup_str(ev, "id", NULL);
	struct rcall *c;
	jv amount = jv_invalid();
	int64_t clamp;
	int n;

	if (!id) {
		note(e, bad, "budget.reserve: no 'id'");
		return;
	}
	c = call_for(r, id);
	if (get_amount(ev, "amount", NULL, &amount) == 1) {
		c->reserved = true;
		c->reserve_amount = jv_number_value(amount);
	} else {
		note(e, bad, "budget.reserve: 'amount' is not a non-negative number");
	}
	n = get_count(ev, "clamped_output_tokens", NULL, &clamp);
	if (n == 1) {
		c->clamped = true;
		c->clamp = clamp;
	} else if (n < 0) {
		note(e, bad, "budget.reserve: bad 'clamped_output_tokens'");
	}
	jv_free(amount);
	free(id);
}

static void fold_state(struct cave_receipt *r, jv ev, cave_err *e, int *bad)
{
	static const char *const denoms[] = { "usd", "tokens", "none", NULL };
	char *d = dup_str(ev, "denomination", NULL);

	if (!in_list(denoms, d)) {
		note(e, bad, "budget.state: unknown denomination '%.60s'", d ? d : "");
	} else {
		jv_free(r->budget);
		r->budget = jv_copy(ev);
	}
	free(d);
}

static void fold_release(struct cave_receipt *r, jv ev, cave_err *e, int *bad)
{
	jv amount = jv_invalid(), t;
	char *reason = dup_str(ev, "reason", NULL);
	int64_t at = (int64_t)r->nlines;

	if (get_amount(ev, "amount", NULL, &amount) != 1 ||
	    !(jv_number_value(amount) > 0)) {
		note(e, bad, "budget.release: 'amount' is not a positive number");
		goto out;
	}
	if (get_count(ev, "at_call", "atCall", &at) < 0) {
		note(e, bad, "budget.release: bad 'at_call'");
		at = (int64_t)r->nlines;
	}
	t = set(jv_object(), "amount", jv_copy(amount));
	t = set(t, "reason", jv_string(reason ? reason : "release"));
	t = set(t, "atCall", jv_number((double)at));
	r->tranches = jv_array_append(r->tranches, t);
out:
	jv_free(amount);
	free(reason);
}

static void fold_tool(struct cave_receipt *r, jv ev, cave_err *e, int *bad)
{
	char *name = dup_str(ev, "name", NULL);
	jv exitv = get(ev, "exit"), sig = get(ev, "signal"), denied = get(ev, "denied");
	struct rtool *t = NULL;
	bool failed;
	size_t i;

	if (!name) {
		note(e, bad, "tool.result: no 'name'");
		name = cave_xstrdup("unknown");
	}
	/* an outcome the event does not state is a failure, never a success */
	failed = jv_get_kind(denied) == JV_KIND_TRUE || !absent(sig) ||
		 jv_get_kind(exitv) != JV_KIND_NUMBER || jv_number_value(exitv) != 0;
	for (i = 0; i < r->ntools; i++)
		if (strcmp(r->tools[i].name, name) == 0)
			t = &r->tools[i];
	if (!t) {
		r->tools = grow(r->tools, r->ntools, &r->captools, sizeof *r->tools);
		t = &r->tools[r->ntools++];
		t->name = name;
		t->calls = t->errors = 0;
		name = NULL;
	}
	t->calls++;
	t->errors += failed;
	free(name);
	jv_free(exitv);
	jv_free(sig);
	jv_free(denied);
}

static void fold_breaker(struct cave_receipt *r, jv ev, cave_err *e, int *bad)
{
	char *kind = dup_str(ev, "kind", NULL);
	char *tool = dup_str(ev, "tool", NULL);
	char *sig = dup_str(ev, "signature", NULL);
	char *basis = dup_str(ev, "spend_basis", "spendBasis");
	jv reserved = jv_invalid(), measured = jv_invalid();
	jv b = jv_invalid();
	int64_t count = 1;
	int nr, nm;

	if (!in_list(breaker_kinds, kind)) {
		note(e, bad, "breaker: unknown kind '%.60s'", kind ? kind : "");
		goto out;
	}
	if (get_count(ev, "count", NULL, &count) < 0) {
		note(e, bad, "breaker: bad 'count'");
		goto out;
	}
	b = set(jv_object(), "kind", jv_string(kind));
	b = set(b, "count", jv_number((double)count));
	if (tool)
		b = set(b, "tool", jv_string(tool));
	if (sig && is_sha256(sig))
		b = set(b, "signature", jv_string(sig));
	nr = get_amount(ev, "reserved_spend", "reservedSpend", &reserved);
	nm = get_amount(ev, "measured_spend", "measuredSpend", &measured);
	if (nr < 0 || nm < 0 || (basis && !in_list(spend_bases, basis))) {
		note(e, bad, "breaker: bad spend fields");
		goto out;
	}
	if (strcmp(kind, "retry_attempted") == 0 && (nr != 1 || nm != 1 || !basis)) {
		note(e, bad, "breaker: retry_attempted without its spend fields");
		goto out;
	}
	if (nr == 1)
		b = set(b, "reservedSpend", jv_copy(reserved));
	if (nm == 1)
		b = set(b, "measuredSpend", jv_copy(measured));
	if (basis)
		b = set(b, "spendBasis", jv_string(basis));
	r->breakers = jv_array_append(r->breakers, b);
	b = jv_invalid();
out:
	jv_free(b);
	jv_free(reserved);
	jv_free(measured);
	free(kind);
	free(tool);
	free(sig);
	free(basis);
}

/* Ids and digests only: the arrays are checked element by element. */
static jv string_array(jv ev, const char *snake, const char *camel,
		       bool digests, bool *ok)
{
	jv v = get2(ev, snake, camel), out = jv_array();
	int i, n;

	if (absent(v))
		goto done;
	if (jv_get_kind(v) != JV_KIND_ARRAY) {
		*ok = false;
		goto done;
	}
	n = jv_array_length(jv_copy(v));
	for (i = 0; i < n; i++) {
		jv s = jv_array_get(jv_copy(v), i);

		if (jv_get_kind(s) != JV_KIND_STRING ||
		    jv_string_length_bytes(jv_copy(s)) == 0 ||
		    (digests && !is_sha256(jv_string_value(s)))) {
			*ok = false;
			jv_free(s);
			continue;
		}
		out = jv_array_append(out, s);
	}
done:
	jv_free(v);
	return out;
}

static void fold_compaction(struct cave_receipt *r, jv ev, cave_err *e, int *bad)
{
	static const char *const tiers[] = { "evicted", "summarized", NULL };
	static const char *const caches[] = { "warm", "cold", "unknown", NULL };
	char *tier = dup_str(ev, "tier", NULL);
	char *cache = dup_str(ev, "cache_state", "cacheState");
	int64_t index = jv_array_length(jv_copy(r->compactions));
	int64_t pre = 0, post = 0, after = 0, ver = 0;
	jv cost = jv_invalid(), net = get2(ev, "modeled_net_tokens", "modeledNetTokens");
	jv pinned, elided, c;
	bool ok = true;
	int nver;

	if (!in_list(tiers, tier)) {
		note(e, bad, "compaction: unknown tier '%.60s'", tier ? tier : "");
		goto out;
	}
	if (get_count(ev, "index", NULL, &index) < 0 ||
	    get_count(ev, "pre_tokens", "preTokens", &pre) < 0 ||
	    get_count(ev, "post_tokens", "postTokens", &post) < 0 ||
	    get_count(ev, "working_calls_after", "workingCallsAfter", &after) < 0 ||
	    get_amount(ev, "metered_cost", "meteredCost", &cost) < 0 ||
	    (!absent(net) && jv_get_kind(net) != JV_KIND_NUMBER) ||
	    (cache && !in_list(caches, cache))) {
		note(e, bad, "compaction: a count, cost or cache state is not valid");
		goto out;
	}
	nver = get_count(ev, "summary_schema_version", "summarySchemaVersion", &ver);
	pinned = string_array(ev, "pinned_segment_ids", "pinnedSegmentIds", false, &ok);
	elided = string_array(ev, "elided_segment_digests", "elidedSegmentDigests",
			      true, &ok);
	if (!ok)
		note(e, bad, "compaction: a segment id or digest is not valid");
	c = set(jv_object(), "index", jv_number((double)index));
	c = set(c, "tier", jv_string(tier));
	c = set(c, "preTokens", jv_number((double)pre));
	c = set(c, "postTokens", jv_number((double)post));
	c = set(c, "pinnedSegmentIds", pinned);
	c = set(c, "elidedSegmentDigests", elided);
	c = set(c, "cacheState", jv_string(cache ? cache : "unknown"));
	if (nver == 1 && ver >= 1)
		c = set(c, "summarySchemaVersion",
				  jv_number((double)ver));
	c = set(c, "meteredCost",
			  jv_is_valid(cost) ? jv_copy(cost) : jv_number(0));
	c = set(c, "meteredBasis", jv_string("measured"));
	c = set(c, "modeledNetTokens",
			  absent(net) ? jv_number(0) : jv_copy(net));
	c = set(c, "modeledBasis", jv_string("modeled"));
	c = set(c, "workingCallsAfter", jv_number((double)after));
	r->compactions = jv_array_append(r->compactions, c);
out:
	jv_free(cost);
	jv_free(net);
	free(tier);
	free(cache);
}

/* A child's own receipt: nested as it came, when it is one. */
static void fold_kid_receipt(struct cave_receipt *r, jv ev, const char *span,
			     cave_err *e, int *bad)
{
	jv rc = get(ev, "receipt");
	jv schema = jv_get_kind(rc) == JV_KIND_OBJECT ? get(rc, "schema") : jv_invalid();
	struct rchild *k;

	if (jv_get_kind(schema) != JV_KIND_STRING ||
	    strcmp(jv_string_value(schema), CAVE_RECEIPT_SCHEMA) != 0) {
		note(e, bad, "receipt: 'receipt' is not a %s object", CAVE_RECEIPT_SCHEMA);
		goto out;
	}
	k = kid_for(r, span);
	jv_free(k->receipt);
	k->receipt = rc;
	rc = jv_invalid();
out:
	jv_free(schema);
	jv_free(rc);
}

int cave_receipt_fold(struct cave_receipt *r, jv ev, cave_err *e)
{
	char *type = NULL, *run = NULL, *span = NULL;
	int bad = 0;

	if (jv_get_kind(ev) != JV_KIND_OBJECT || !(type = dup_str(ev, "type", NULL))) {
		note(e, &bad, "not an event (no 'type')");
		goto out;
	}
	run = dup_str(ev, "run", NULL);
	span = dup_str(ev, "span", NULL);
	if (span && !r->first_span)
		r->first_span = cave_xstrdup(span);
	/* Under a run.start's root span, another span is a subagent's. */
	if (r->root_span && span && strcmp(span, r->root_span) != 0) {
		struct rchild *k;
		char *top = kid_span(r, ev, type, span);

		if (strcmp(type, "receipt") == 0) {
			fold_kid_receipt(r, ev, top, e, &bad);
			free(top);
			goto out;
		}
		k = kid_for(r, top);
		free(top);
		if (!k->fold)
			k->fold = cave_receipt_new(r->cat);
		if (cave_receipt_fold(k->fold, ev, e) < 0)
			bad = 1;
		goto out;
	}
	if (run && !r->run_known && is_uuid(run)) {
		snprintf(r->run, sizeof r->run, "%s", run);
		r->run_known = true;
	}
	if (strcmp(type, "run.start") == 0)
		fold_run_start(r, ev, run, span, e, &bad);
	else if (strcmp(type, "run.end") == 0)
		fold_stop(r, ev, true, e, &bad);
	else if (strcmp(type, "run.stop") == 0)
		fold_stop(r, ev, false, e, &bad);
	else if (strncmp(type, "call.", 5) == 0 && strcmp(type, "call.delta") != 0)
		fold_call(r, ev, type, e, &bad);
	else if (strcmp(type, "budget.state") == 0)
		fold_state(r, ev, e, &bad);
	else if (strcmp(type, "budget.reserve") == 0)
		fold_reserve(r, ev, e, &bad);
	else if (strcmp(type, "budget.release") == 0)
		fold_release(r, ev, e, &bad);
	else if (strcmp(type, "tool.result") == 0)
		fold_tool(r, ev, e, &bad);
	else if (strcmp(type, "breaker") == 0)
		fold_breaker(r, ev, e, &bad);
	else if (strcmp(type, "compaction") == 0)
		fold_compaction(r, ev, e, &bad);
	/* a receipt under the root span is this run's own, written earlier */
out:
	free(type);
	free(run);
	free(span);
	return bad ? -1 : 0;
}

const char *cave_receipt_span(const struct cave_receipt *r)
{
	return r->root_span ? r->root_span : r->first_span;
}

unsigned long cave_receipt_unknown_calls(const struct cave_receipt *r)
{
	unsigned long n = 0;
	size_t i;

	for (i = 0; i < r->ncalls; i++)
		n += r->calls[i].requested && !r->calls[i].done;
	for (i = 0; i < r->nkids; i++)
		if (r->kids[i].fold && jv_get_kind(r->kids[i].receipt) == JV_KIND_NULL)
			n += cave_receipt_unknown_calls(r->kids[i].fold);
	return n;
}

int64_t cave_receipt_pico(double usd)
{
	if (!(usd > 0))
		return 0;
	if (usd >= 9.0e6) /* past what int64 pico-USD holds: saturate */
		return INT64_C(9000000) * INT64_C(1000000000000);
	return (int64_t)llround(usd * PICO_PER_USD);
}

static bool denomination_is(const struct cave_receipt *r, const char *d)
{
	jv v = get(r->budget, "denomination");
	bool is = jv_get_kind(v) == JV_KIND_STRING && strcmp(jv_string_value(v), d) == 0;

	jv_free(v);
	return is;
}

/* Money sums saturate rather than wrap (9 million USD is far past any
 * budget this program meters). */
static void add_pico(int64_t *acc, int64_t v)
{
	if (__builtin_add_overflow(*acc, v, acc))
		*acc = INT64_MAX;
}

/* One entry of calls[]; adds its money and tokens to the totals. */
static jv line_jv(const struct cave_receipt *r, const struct rline *l,
		  int64_t *pico_total, int64_t *tokens, bool *unpriced)
{
	const struct rcall *c = &r->calls[l->call];
	const struct cave_model *m = NULL;
	int64_t pico = 0;
	bool priced = false;
	jv o;

	if (l->u.available) {
		if (r->cat)
			m = cave_catalog_find(r->cat, l->provider, l->model);
		priced = cave_price_usage(m, &l->u, &pico) == 0;
		*tokens += l->u.input + l->u.cache_read + l->u.cache_write + l->u.output;
	} else if (c->reserved && denomination_is(r, "usd")) {
		/* no usage: the worst case held for it is the honest estimate */
		pico = cave_receipt_pico(c->reserve_amount);
		priced = true;
	}
	if (!priced) {
		pico = 0;
		*unpriced = true;
	}
	add_pico(pico_total, pico);
	o = set(jv_object(), "provider", jv_string(l->provider));
	o = set(o, "model", jv_string(l->model));
	o = set(o, "inputTokens", jv_number((double)l->u.input));
	o = set(o, "outputTokens", jv_number((double)l->u.output));
	o = set(o, "cacheReadTokens", jv_number((double)l->u.cache_read));
	o = set(o, "cacheWriteTokens", jv_number((double)l->u.cache_write));
	o = set(o, "reasoningTokens", jv_number((double)l->u.reasoning));
	o = set(o, "estimatedUsd", cave_usd_jv(pico));
	o = set(o, "unpriced", jv_bool(!priced));
	o = set(o, "usageBasis",
			  jv_string(l->u.available ? "provider_reported" : "unavailable"));
	if (c->clamped)
		o = set(o, "clampedOutputTokens",
				  jv_number((double)c->clamp));
	return o;
}

/* Adds a budget.state member to o under name when it is a number >= 0. */
static jv budget_amount(jv o, jv state, const char *key, const char *name)
{
	jv v = jv_invalid();

	if (get_amount(state, key, NULL, &v) == 1)
		return set(o, name, v);
	return o;
}

jv cave_receipt_jv(const struct cave_receipt *r)
{
	int64_t pico = 0, tokens = 0;
	bool unpriced = false, breached = false;
	jv calls = jv_array(), tools = jv_array(), kids = jv_array();
	jv o, overspent = jv_invalid();
	const char *denom = "none";
	size_t i;

	for (i = 0; i < r->nlines; i++)
		calls = jv_array_append(calls, line_jv(r, &r->lines[i], &pico,
							&tokens, &unpriced));
	for (i = 0; i < r->ntools; i++) {
		jv t = set(jv_object(), "name", jv_string(r->tools[i].name));

		t = set(t, "calls", jv_number((double)r->tools[i].calls));
		t = set(t, "errors", jv_number((double)r->tools[i].errors));
		tools = jv_array_append(tools, t);
	}
	/* The tree's totals: a subagent's spend is the parent's spend too. */
	for (i = 0; i < r->nkids; i++) {
		const struct rchild *k = &r->kids[i];
		jv kr;

		if (jv_get_kind(k->receipt) == JV_KIND_OBJECT)
			kr = jv_copy(k->receipt);
		else if (k->fold)
			kr = cave_receipt_jv(k->fold);
		else
			continue;
		jv usd = get(kr, "totalEstimatedUsd"), tok = get(kr, "totalTokens");
		jv unp = get(kr, "unpriced");

		if (jv_get_kind(usd) == JV_KIND_NUMBER)
			add_pico(&pico, cave_receipt_pico(jv_number_value(usd)));
		if (jv_get_kind(tok) == JV_KIND_NUMBER && jv_number_value(tok) > 0)
			tokens += (int64_t)jv_number_value(tok);
		if (jv_get_kind(unp) != JV_KIND_FALSE)
			unpriced = true;
		jv_free(usd);
		jv_free(tok);
		jv_free(unp);
		kids = jv_array_append(kids, kr);
	}
	if (denomination_is(r, "usd"))
		denom = "usd";
	else if (denomination_is(r, "tokens"))
		denom = "tokens";
	o = set(jv_object(), "schema", jv_string(CAVE_RECEIPT_SCHEMA));
	o = set(o, "runId", jv_string(r->run));
	o = set(o, "agentId", jv_string(r->agent ? r->agent : "adhoc"));
	o = set(o, "basis", jv_string("estimated_list_price_subtotal"));
	o = set(o, "claimBasis", jv_string("inferred"));
	o = set(o, "stopReason", jv_string(r->stop));
	o = set(o, "denomination", jv_string(denom));
	if (strcmp(denom, "none") != 0) {
		jv cb = get(r->budget, "cap_breached");

		breached = jv_get_kind(cb) == JV_KIND_TRUE;
		jv_free(cb);
		o = budget_amount(o, r->budget, "max", "max");
		o = budget_amount(o, r->budget, "released", "released");
		o = budget_amount(o, r->budget, "spent", "spent");
		if (get_amount(r->budget, "overspent", NULL, &overspent) != 1)
			overspent = jv_invalid();
	}
	o = set(o, "capBreached", jv_bool(breached));
	o = set(o, "overspent",
			  jv_is_valid(overspent) ? overspent : jv_number(0));
	o = set(o, "totalEstimatedUsd", cave_usd_jv(pico));
	o = set(o, "totalTokens", jv_number((double)tokens));
	o = set(o, "unpriced", jv_bool(unpriced));
	o = set(o, "calls", calls);
	o = set(o, "tools", tools);
	o = set(o, "subagents", kids);
	o = set(o, "tranches", jv_copy(r->tranches));
	o = set(o, "breakers", jv_copy(r->breakers));
	o = set(o, "compactions", jv_copy(r->compactions));
	return o;
}

/* Writes all n bytes of p to fd; -1 with errno set. */
static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int cave_receipt_write(const char *path, jv receipt, cave_err *e)
{
	size_t len = strlen(path) + sizeof ".tmp.XXXXXX";
	char *tmp = cave_xmalloc(len);
	jv text = jv_dump_string(jv_copy(receipt), 0);
	int fd, ret = -1, failed;

	snprintf(tmp, len, "%s.tmp.XXXXXX", path);
	fd = mkstemp(tmp);
	if (fd < 0) {
		cave_errf(e, "io", "cannot create '%s': %s", tmp, strerror(errno));
		goto out;
	}
	failed = write_all(fd, jv_string_value(text),
			   (size_t)jv_string_length_bytes(jv_copy(text))) < 0 ||
		 write_all(fd, "\n", 1) < 0 || fchmod(fd, 0644) < 0 || fsync(fd) < 0;
	if (close(fd) < 0)
		failed = 1;
	if (failed || rename(tmp, path) < 0) {
		cave_errf(e, "io", "cannot write '%s': %s", path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	ret = 0;
out:
	free(tmp);
	jv_free(text);
	return ret;
}

/* cave-call: performs model calls. Reads call.request events, talks to the
 * provider in its wire protocol with libcurl (or replays the offline
 * fixture corpus), writes call.delta events as text streams in and one
 * call.response or final call.error per request, and passes every other
 * line through untouched. Keys go only into request headers: never into an
 * event, a message, a URL or a file. */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "event.h"
#include "fixture.h"
#include "io.h"
#include "msg.h"
#include "proto.h"
#include "retry.h"
#include "sse.h"

#define SRC "cave-call"
#define BODY_MAX ((size_t)32 << 20)  /* a whole response body */
#define ERR_BODY_MAX ((size_t)64 << 10)
#define SSE_EVENT_MAX ((size_t)16 << 20)

static const char usage[] =
	"usage: cave-call [OPTIONS] < events > events\n"
	"  --max-attempts N       attempts per call, first included (default 4)\n"
	"  --retry-base-ms N      first backoff (default 500)\n"
	"  --retry-max-ms N       longest wait between attempts (default 60000)\n"
	"  --timeout-ms N         whole-attempt timeout (default 600000)\n"
	"  --connect-timeout-ms N (default 10000)\n"
	"  --idle-timeout-ms N    give up when no byte arrives for this long (default 120000)\n"
	"  --concurrency N        calls in flight at once (default 8)\n"
	"  --fixtures DIR         the offline corpus for fixture/ models\n"
	"  --record DIR           record each live exchange into DIR (no headers, no keys)\n";

struct opts {
	struct cave_retry_policy retry;
	long timeout_ms, connect_ms, idle_ms;
	int concurrency;
	const char *fixtures, *record;
};

struct call {
	struct call *next;
	jv req;                  /* the call.request (owned) */
	char id[128];
	enum cave_api api;
	char provider[64];       /* as requested: "fixture" or the real one */
	char target[256];        /* "P/M" the call is for */
	bool fixture;
	int attempt;
	bool waiting;            /* between attempts, until retry_at */
	bool no_retry;           /* a retry.cancel came: no further attempt */
	char cancel_code[40];    /* its code, for the final call.error */
	char cancel_msg[320];
	double t0, t_first, retry_at;
	CURL *easy;
	struct curl_slist *hdrs;
	struct cave_http_req http;
	struct cave_sse *sse;
	struct cave_acc *acc;
	long status;
	bool is_sse;
	char content_type[128];
	long retry_after_ms;
	struct cave_buf body;    /* a whole body or an error body */
	struct cave_buf raw;     /* every byte, for --record */
	bool stream_failed, deltas_sent, too_large;
	cave_err err;
};

static struct cave_io io;
static struct opts opt = {
	.retry = { .max_attempts = 4, .base_ms = 500, .max_ms = 60000 },
	.timeout_ms = 600000, .connect_ms = 10000, .idle_ms = 120000,
	.concurrency = 8,
};
static CURLM *multi;
static struct call *calls;
static int running;
static int exit_code;
static struct cave_emitter em; /* its seq; run and span come from each request */
static volatile sig_atomic_t got_signal;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static double random01(void)
{
	uint32_t r = 0;
	if (getrandom(&r, sizeof r, 0) != sizeof r)
		return 0.5;
	return (double)r / 4294967296.0;
}

static void fail_with(int code)
{
	if (!exit_code)
		exit_code = code;
}

/* A new event answering c's request: same run, span and id. */
static jv answer(struct call *c, const char *type)
{
	jv ev = cave_event_new(type, SRC);
	const char *run = cave_jv_str(c->req, "run", NULL);
	const char *span = cave_jv_str(c->req, "span", NULL);
	if (run)
		ev = jv_object_set(ev, jv_string("run"), jv_string(run));
	if (span)
		ev = jv_object_set(ev, jv_string("span"), jv_string(span));
	ev = jv_object_set(ev, jv_string("seq"), jv_number((double)++em.seq));
	return jv_object_set(ev, jv_string("id"), jv_string(c->id));
}

static jv with_call_fields(struct call *c, jv ev)
{
	const char *model = cave_jv_str(c->req, "model", "");
	ev = jv_object_set(ev, jv_string("provider"), jv_string(c->provider));
	ev = jv_object_set(ev, jv_string("model"), jv_string(model));
	return jv_object_set(ev, jv_string("api"), jv_string(cave_api_name(c->api)));
}

static void on_delta(void *ctx, const char *text, size_t len)
{
	struct call *c = ctx;
	jv ev;
	if (!len)
		return;
	if (!c->deltas_sent)
		c->t_first = now_ms();
	c->deltas_sent = true;
	ev = answer(c, "call.delta");
	ev = jv_object_set(ev, jv_string("text"), jv_string_sized(text, (int)len));
	cave_io_emit(&io, ev);
}

static int on_sse(void *ctx, const char *event, const char *data, size_t len, cave_err *e)
{
	struct call *c = ctx;
	return cave_acc_event(c->acc, event, data, len, on_delta, c, e);
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
	struct call *c = ctx;
	size_t len = size * n;
	char line[512];
	snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
	line[strcspn(line, "\r\n")] = '\0';
	if (strncmp(line, "HTTP/", 5) == 0) {
		const char *sp = strchr(line, ' ');
		c->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		c->content_type[0] = '\0';
		c->retry_after_ms = -1;
	} else if (strncasecmp(line, "content-type:", 13) == 0) {
		const char *v = line + 13;
		while (*v == ' ')
			v++;
		snprintf(c->content_type, sizeof c->content_type, "%.*s",
			 (int)sizeof c->content_type - 1, v);
	} else if (strncasecmp(line, "retry-after-ms:", 15) == 0) {
		char *end;
		double ms = strtod(line + 15, &end);
		if (end != line + 15 && ms >= 0)
			c->retry_after_ms = (long)ms;
	} else if (strncasecmp(line, "retry-after:", 12) == 0 && c->retry_after_ms < 0) {
		c->retry_after_ms = cave_retry_after_ms(line + 12, (long)time(NULL));
	}
	return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
	struct call *c = ctx;
	size_t len = size * n;
	bool ok = c->status >= 200 && c->status < 300;
	if (opt.record && !c->fixture)
		cave_buf_add(&c->raw, p, len); /* past its cap the record is cut and not saved */
	if (ok && !c->is_sse && strstr(c->content_type, "text/event-stream"))
		c->is_sse = true;
	if (ok && c->is_sse) {
		if (cave_sse_feed(c->sse, p, len, on_sse, c, &c->err) < 0) {
			c->stream_failed = true;
			return 0; /* stops the transfer */
		}
		return len;
	}
	if (cave_buf_add(&c->body, p, len) < 0) {
		if (ok) {
			c->too_large = true;
			return 0;
		}
		/* an error body is only for the message: its start will do */
	}
	return len;
}

/* A call.error for c; cause (may be NULL) is the code of the failure
 * behind e when e's own code is a decision about it (a cancelled retry). */
static void emit_error_cause(struct call *c, const cave_err *e, bool final, long delay_ms,
			     const char *cause)
{
	jv ev = with_call_fields(c, answer(c, "call.error"));
	jv res = c->acc ? cave_acc_result(c->acc) : jv_null();
	ev = jv_object_set(ev, jv_string("code"), jv_string(e->code));
	if (cause)
		ev = jv_object_set(ev, jv_string("cause"), jv_string(cause));
	ev = jv_object_set(ev, jv_string("retryable"), e->retryable ? jv_true() : jv_false());
	ev = jv_object_set(ev, jv_string("status"), c->status ? jv_number((double)c->status) : jv_null());
	ev = jv_object_set(ev, jv_string("attempt"), jv_number(c->attempt));
	ev = jv_object_set(ev, jv_string("final"), final ? jv_true() : jv_false());
	if (!final)
		ev = jv_object_set(ev, jv_string("retry_after_ms"), jv_number((double)delay_ms));
	ev = jv_object_set(ev, jv_string("message"), jv_string(e->msg));
	/* money may have been spent before the failure: keep what was reported */
	if (jv_get_kind(res) == JV_KIND_OBJECT) {
		jv u = jv_object_get(jv_copy(res), jv_string("usage"));
		if (jv_get_kind(u) == JV_KIND_OBJECT) {
			ev = jv_object_set(ev, jv_string("usage"), u);
			ev = jv_object_set(ev, jv_string("usage_basis"), jv_string("provider_reported"));
		} else {
			jv_free(u);
		}
	}
	jv_free(res);
	cave_io_emit(&io, ev);
}

static void emit_error(struct call *c, const cave_err *e, bool final, long delay_ms)
{
	emit_error_cause(c, e, final, delay_ms, NULL);
}

static void emit_response(struct call *c)
{
	jv ev = with_call_fields(c, answer(c, "call.response"));
	jv res = cave_acc_result(c->acc);
	double t = now_ms();
	jv_object_foreach(res, k, v)
		ev = jv_object_set(ev, k, v);
	jv_free(res);
	ev = jv_object_set(ev, jv_string("attempts"), jv_number(c->attempt));
	ev = jv_object_set(ev, jv_string("ms"), jv_number((double)(long)(t - c->t0)));
	ev = jv_object_set(ev, jv_string("ttft_ms"),
			   c->deltas_sent ? jv_number((double)(long)(c->t_first - c->t0)) : jv_null());
	cave_io_emit(&io, ev);
}

static void reset_attempt(struct call *c)
{
	if (c->easy) {
		curl_multi_remove_handle(multi, c->easy);
		curl_easy_cleanup(c->easy);
		c->easy = NULL;
		running--;
	}
	curl_slist_free_all(c->hdrs);
	c->hdrs = NULL;
	cave_sse_free(c->sse);
	c->sse = NULL;
	cave_acc_free(c->acc);
	c->acc = NULL;
	cave_buf_free(&c->body);
	cave_buf_free(&c->raw);
	c->status = 0;
	c->is_sse = false;
	c->content_type[0] = '\0';
	c->retry_after_ms = -1;
	c->stream_failed = c->too_large = false;
	memset(&c->err, 0, sizeof c->err);
}

static void call_free(struct call *c)
{
	struct call **pp;
	reset_attempt(c);
	cave_http_req_free(&c->http);
	jv_free(c->req);
	for (pp = &calls; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	free(c);
}

static void record(struct call *c)
{
	cave_err e;
	char key[CAVE_SHA256_HEX];
	if (!opt.record || c->fixture || c->raw.len == 0)
		return;
	cave_fixture_key(c->req, c->target, key);
	if (cave_fixture_save(opt.record, key, c->req, c->target, cave_api_name(c->api),
			      c->status, c->content_type, c->raw.data, c->raw.len, &e) < 0)
		cave_warn("--record: %s", e.msg);
}

static int exit_for(const char *code)
{
	if (!strcmp(code, "malformed_stream") || !strcmp(code, "malformed_response") ||
	    !strcmp(code, "bad_request") || !strcmp(code, "fixture_bad"))
		return CAVE_EX_DATA;
	if (!strcmp(code, "no_api_key"))
		return CAVE_EX_CONFIG;
	return CAVE_EX_UNAVAILABLE;
}

/* Ends c with a final call.error in the code of its retry.cancel, as the
 * budget asked; cause (may be NULL) is the code of an attempt that failed
 * after the cancel came, why its error. */
static void cancel(struct call *c, const char *cause, const cave_err *why)
{
	cave_err e = { 0 };
	if (why)
		cave_errf(&e, c->cancel_code, "%s; attempt %d, under way then, failed too: %s",
			  c->cancel_msg, c->attempt, why->msg);
	else
		cave_errf(&e, c->cancel_code, "%s", c->cancel_msg);
	e.retryable = 0;
	emit_error_cause(c, &e, true, 0, cause);
	fail_with(exit_for(e.code));
	call_free(c);
}

/* An attempt ended: success, another attempt, or a final error. */
static void settle_attempt(struct call *c, CURLcode res)
{
	cave_err e = { 0 };
	bool failed = true;
	if (c->stream_failed) {
		e = c->err;
	} else if (c->too_large) {
		cave_errf(&e, "malformed_response", "response body larger than %zu bytes", BODY_MAX);
	} else if (res != CURLE_OK) {
		bool cut = c->status >= 200 && c->status < 300;
		switch (res) {
		case CURLE_COULDNT_CONNECT:
		case CURLE_COULDNT_RESOLVE_HOST:
			cave_errf(&e, "connect_failed", "cannot connect to the provider: %s",
				  curl_easy_strerror(res));
			break;
		case CURLE_OPERATION_TIMEDOUT:
			cave_errf(&e, "timeout", "the provider did not answer in time: %s",
				  curl_easy_strerror(res));
			break;
		default:
			cave_errf(&e, cut ? "truncated_stream" : "network",
				  "%s: %s", cut ? "the response was cut off" : "network error",
				  curl_easy_strerror(res));
		}
		e.retryable = 1;
	} else if (c->status < 200 || c->status >= 300) {
		char msg[300];
		cave_proto_error_message(c->api, c->body.data ? c->body.data : "", c->body.len,
					 msg, sizeof msg);
		cave_errf(&e, "http_error", "HTTP %ld: %s", c->status, msg);
		snprintf(e.code, sizeof e.code, "http_%ld", c->status);
		e.retryable = cave_retry_status(c->status);
	} else if (c->is_sse) {
		if (cave_sse_finish(c->sse) || !cave_acc_complete(c->acc)) {
			cave_errf(&e, "truncated_stream",
				  "the stream ended before the provider finished the response");
			e.retryable = 1;
		} else {
			failed = false;
		}
	} else if (cave_acc_body(c->acc, c->body.data ? c->body.data : "", c->body.len, &e) == 0) {
		failed = false;
	}

	if (!failed) {
		emit_response(c);
		record(c);
		call_free(c);
		return;
	}
	/* text already streamed cannot be taken back: no second attempt then */
	if (e.retryable && !c->deltas_sent && !c->fixture && c->attempt < opt.retry.max_attempts &&
	    c->no_retry) {
		/* the retry was cancelled while this attempt ran: it was the last;
		 * its own code goes in 'cause' (the budget judges by it what it
		 * may have cost) */
		cancel(c, e.code, &e);
		return;
	}
	if (e.retryable && !c->deltas_sent && !c->fixture && c->attempt < opt.retry.max_attempts) {
		long delay = cave_retry_delay_ms(&opt.retry, c->attempt, c->retry_after_ms, random01());
		emit_error(c, &e, false, delay);
		reset_attempt(c);
		c->waiting = true;
		c->retry_at = now_ms() + (double)delay;
		return;
	}
	emit_error(c, &e, true, 0);
	fail_with(exit_for(e.code));
	call_free(c);
}

static const char *key_env(enum cave_api a, const char **name)
{
	const char *k;
	switch (a) {
	case CAVE_API_ANTHROPIC:
		*name = "ANTHROPIC_API_KEY";
		return getenv("ANTHROPIC_API_KEY");
	case CAVE_API_GEMINI:
		*name = "GEMINI_API_KEY";
		k = getenv("GEMINI_API_KEY");
		return k && *k ? k : getenv("GOOGLE_API_KEY");
	default:
		*name = "OPENAI_API_KEY";
		return getenv("OPENAI_API_KEY");
	}
}

static const char *base_env(enum cave_api a)
{
	const char *b = a == CAVE_API_ANTHROPIC ? getenv("ANTHROPIC_BASE_URL")
		      : a == CAVE_API_GEMINI   ? getenv("GOOGLE_GEMINI_BASE_URL")
					       : getenv("OPENAI_BASE_URL");
	return b && *b ? b : NULL;
}

/* Starts (or restarts) c's transfer. */
static void start_attempt(struct call *c)
{
	const char *keyname, *key = key_env(c->api, &keyname), *prefix = "";
	const char *hname = cave_proto_key_header(c->api, &prefix);
	struct cave_buf h;
	cave_err e;

	c->attempt++;
	c->waiting = false;
	cave_buf_init(&c->body, BODY_MAX);
	cave_buf_init(&c->raw, BODY_MAX);
	c->sse = cave_sse_new(SSE_EVENT_MAX);
	c->acc = cave_acc_new(c->api);
	c->retry_after_ms = -1;
	if (!key || !*key) {
		cave_errf(&e, "no_api_key", "%s is not set", keyname);
		emit_error(c, &e, true, 0);
		fail_with(CAVE_EX_CONFIG);
		call_free(c);
		return;
	}
	for (int i = 0; i < 8 && c->http.headers[i]; i++)
		c->hdrs = curl_slist_append(c->hdrs, c->http.headers[i]);
	cave_buf_init(&h, 8192);
	if (cave_buf_addf(&h, "%s: %s%s", hname, prefix ? prefix : "", key) < 0) {
		cave_errf(&e, "no_api_key", "%s is too long", keyname);
		emit_error(c, &e, true, 0);
		fail_with(CAVE_EX_CONFIG);
		call_free(c);
		return;
	}
	c->hdrs = curl_slist_append(c->hdrs, h.data);
	explicit_bzero(h.data, h.len);
	cave_buf_free(&h);
	c->hdrs = curl_slist_append(c->hdrs, "Expect:");

	c->easy = curl_easy_init();
	if (!c->easy || !c->hdrs)
		cave_die(CAVE_EX_SOFTWARE, "cannot set up a transfer");
	curl_easy_setopt(c->easy, CURLOPT_URL, c->http.url);
	curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, c->hdrs);
	curl_easy_setopt(c->easy, CURLOPT_POST, 1L);
	curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->http.body);
	curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->http.body_len);
	curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c->easy, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c);
	curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, opt.timeout_ms);
	curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT_MS, opt.connect_ms);
	curl_easy_setopt(c->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c->easy, CURLOPT_LOW_SPEED_TIME, (opt.idle_ms + 999) / 1000);
	curl_easy_setopt(c->easy, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(c->easy, CURLOPT_USERAGENT, "cave/0.1");
	curl_easy_setopt(c->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c->easy, CURLOPT_TCP_NODELAY, 1L);
	if (curl_multi_add_handle(multi, c->easy) != CURLM_OK)
		cave_die(CAVE_EX_SOFTWARE, "cannot start a transfer");
	running++;
}

/* A fixture call answers from the corpus, through the same parser. */
static void replay(struct call *c)
{
	char dir[4096], key[CAVE_SHA256_HEX];
	cave_err e = { 0 };
	jv x;
	const char *body;
	c->attempt = 1;
	cave_buf_init(&c->body, BODY_MAX);
	cave_buf_init(&c->raw, 0);
	c->sse = cave_sse_new(SSE_EVENT_MAX);
	c->acc = cave_acc_new(c->api);
	if (cave_fixture_dir(opt.fixtures, dir, sizeof dir) < 0) {
		cave_errf(&e, "fixture_miss", "no fixture corpus found (set --fixtures or CAVE_FIXTURES)");
		goto fail;
	}
	cave_fixture_key(c->req, c->target, key);
	x = cave_fixture_load(dir, key, &e);
	if (!jv_is_valid(x)) {
		jv_free(x);
		goto fail;
	}
	if (strcmp(cave_jv_str(x, "api", ""), cave_api_name(c->api)) != 0) {
		cave_errf(&e, "fixture_miss", "the recorded exchange (key %.12s) speaks %s, not %s",
			  key, cave_jv_str(x, "api", "?"), cave_api_name(c->api));
		jv_free(x);
		goto fail;
	}
	c->status = (long)cave_jv_int(x, "status", 200);
	snprintf(c->content_type, sizeof c->content_type, "%s", cave_jv_str(x, "content_type", ""));
	body = cave_jv_str(x, "body", "");
	on_body((char *)body, 1, strlen(body), c);
	jv_free(x);
	settle_attempt(c, CURLE_OK);
	return;
fail:
	emit_error(c, &e, true, 0);
	fail_with(exit_for(e.code));
	call_free(c);
}

static void new_call(jv req) /* consumes req */
{
	struct call *c = cave_xcalloc(1, sizeof *c);
	const char *provider = cave_jv_str(req, "provider", "");
	const char *model = cave_jv_str(req, "model", "");
	const char *api = cave_jv_str(req, "api", NULL);
	cave_err e = { 0 };
	int a;
	c->req = req;
	c->t0 = now_ms();
	c->retry_after_ms = -1;
	snprintf(c->id, sizeof c->id, "%s", cave_jv_str(req, "id", "c1"));
	snprintf(c->provider, sizeof c->provider, "%s", provider);
	c->fixture = strcmp(provider, "fixture") == 0;
	if (c->fixture)
		snprintf(c->target, sizeof c->target, "%s", model);
	else
		snprintf(c->target, sizeof c->target, "%s/%s", provider, model);
	c->next = calls;
	calls = c;
	if (api)
		a = cave_api_parse(api);
	else if (c->fixture) {
		char p[64];
		snprintf(p, sizeof p, "%.*s", (int)strcspn(model, "/"), model);
		a = cave_api_default(p);
	} else
		a = cave_api_default(provider);
	if (!*provider || !*model || a < 0) {
		c->api = CAVE_API_ANTHROPIC;
		cave_errf(&e, "bad_request", "call.request '%s': %s", c->id,
			  !*provider ? "no provider" : !*model ? "no model" : "unknown api");
		goto fail;
	}
	c->api = (enum cave_api)a;
	if (cave_proto_build(c->api, req, c->fixture ? NULL : base_env(c->api), &c->http, &e) < 0)
		goto fail;
	if (c->fixture)
		replay(c);
	else
		c->waiting = true; /* started by the loop, within the concurrency cap */
	return;
fail:
	emit_error(c, &e, true, 0);
	fail_with(exit_for(e.code));
	call_free(c);
}

/* A retry.cancel (cave-budget's, in the ring): the call it names starts
 * no further attempt. Between attempts it ends now; an attempt already
 * running is let finish, and is the last. */
static void on_cancel(const char *line, size_t len)
{
	cave_err e;
	char where[64];
	const char *id, *span, *cspan;
	struct call *c;
	jv ev;
	snprintf(where, sizeof where, "%s:%lu", io.in_name, io.lineno);
	ev = cave_event_parse(line, len, where, &e);
	if (!jv_is_valid(ev)) {
		cave_warn("%s", e.msg);
		fail_with(CAVE_EX_DATA);
		jv_free(ev);
		return;
	}
	id = cave_jv_str(ev, "id", "");
	span = cave_jv_str(ev, "span", NULL);
	for (c = calls; c; c = c->next) {
		cspan = cave_jv_str(c->req, "span", NULL);
		if (strcmp(c->id, id) == 0 && (!span || !cspan || strcmp(span, cspan) == 0))
			break;
	}
	if (c && !c->no_retry) {
		c->no_retry = true;
		snprintf(c->cancel_code, sizeof c->cancel_code, "%s",
			 cave_jv_str(ev, "code", "retry_cancelled"));
		snprintf(c->cancel_msg, sizeof c->cancel_msg, "%s",
			 cave_jv_str(ev, "message", "the retry was cancelled"));
		if (c->waiting)
			cancel(c, NULL, NULL);
	}
	jv_free(ev);
}

static void abort_all(int sig);

static int on_line(void *ctx, char *line, size_t len)
{
	struct cave_ev_head h;
	cave_err e;
	char where[64];
	jv ev;
	(void)ctx;
	if (cave_event_peek(line, len, &h) == 0) {
		if (cave_event_src_is(&h, SRC))
			return 0; /* our own event, back from its lap */
		cave_io_pass(&io, line, len);
		if (cave_event_type_is(&h, "retry.cancel")) {
			on_cancel(line, len);
			return 0;
		}
		if (!cave_event_type_is(&h, "call.request"))
			return 0;
	}
	snprintf(where, sizeof where, "%s:%lu", io.in_name, io.lineno);
	ev = cave_event_parse(line, len, where, &e);
	if (!jv_is_valid(ev)) {
		cave_warn("%s", e.msg);
		fail_with(CAVE_EX_DATA);
		return 0;
	}
	if (h.type == NULL) { /* valid but not in envelope order: not ours to judge */
		cave_io_pass(&io, line, len);
		if (strcmp(cave_jv_str(ev, "type", ""), "call.request") != 0 ||
		    strcmp(cave_jv_str(ev, "src", ""), SRC) == 0) {
			jv_free(ev);
			return 0;
		}
	}
	new_call(ev);
	if (got_signal)
		abort_all(got_signal); /* after an abort no call is made */
	return 0;
}

static void abort_all(int sig)
{
	while (calls) {
		cave_err e;
		struct call *c = calls;
		if (sig)
			cave_errf(&e, "aborted", "aborted by signal %d", sig);
		else
			cave_errf(&e, "aborted", "aborted: the reader went away");
		emit_error(c, &e, true, 0);
		call_free(c);
	}
}

static void on_signal(int sig)
{
	got_signal = sig;
}

static long parse_num(const char *s, const char *name, long lo, long hi)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < lo || v > hi)
		cave_die(CAVE_EX_USAGE, "--%s: expected a number from %ld to %ld, got '%s'", name, lo, hi, s);
	return v;
}

static void parse_opts(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "max-attempts", required_argument, NULL, 1 },
		{ "retry-base-ms", required_argument, NULL, 2 },
		{ "retry-max-ms", required_argument, NULL, 3 },
		{ "timeout-ms", required_argument, NULL, 4 },
		{ "connect-timeout-ms", required_argument, NULL, 5 },
		{ "idle-timeout-ms", required_argument, NULL, 6 },
		{ "concurrency", required_argument, NULL, 7 },
		{ "fixtures", required_argument, NULL, 8 },
		{ "record", required_argument, NULL, 9 },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int c, i;
	while ((c = getopt_long(argc, argv, "h", lo, &i)) != -1) {
		switch (c) {
		case 1: opt.retry.max_attempts = (int)parse_num(optarg, lo[i].name, 1, 20); break;
		case 2: opt.retry.base_ms = parse_num(optarg, lo[i].name, 0, 600000); break;
		case 3: opt.retry.max_ms = parse_num(optarg, lo[i].name, 0, 3600000); break;
		case 4: opt.timeout_ms = parse_num(optarg, lo[i].name, 1, 86400000); break;
		case 5: opt.connect_ms = parse_num(optarg, lo[i].name, 1, 600000); break;
		case 6: opt.idle_ms = parse_num(optarg, lo[i].name, 1000, 86400000); break;
		case 7: opt.concurrency = (int)parse_num(optarg, lo[i].name, 1, 256); break;
		case 8: opt.fixtures = optarg; break;
		case 9: opt.record = optarg; break;
		case 'h': fputs(usage, stdout); exit(0);
		default: fputs(usage, stderr); exit(CAVE_EX_USAGE);
		}
	}
	if (optind < argc)
		cave_die(CAVE_EX_USAGE, "unexpected argument '%s'; see --help", argv[optind]);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	cave_err e;
	cave_set_prog(SRC);
	cave_emitter_init(&em, SRC);
	parse_opts(argc, argv);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(multi = curl_multi_init()))
		cave_die(CAVE_EX_SOFTWARE, "cannot initialise libcurl");
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	cave_io_init(&io, STDIN_FILENO, STDOUT_FILENO);

	for (;;) {
		struct pollfd pf[2];
		struct curl_waitfd wf[2];
		int n, still;
		double t = now_ms(), next = t + 250;
		CURLMsg *m;

		if (io.out_closed)
			break;
		/* an abort ends the calls in flight with an error each, then
		 * keeps passing events until the input ends, so that what the
		 * ring settles after it (cave-budget's settle) still goes round */
		if (got_signal && calls)
			abort_all(got_signal);
		for (struct call *c = calls, *nx; c; c = nx) {
			nx = c->next; /* start_attempt may free c */
			if (!c->waiting)
				continue;
			if (c->retry_at <= t && running < opt.concurrency)
				start_attempt(c);
			else if (c->retry_at > t && c->retry_at < next)
				next = c->retry_at;
		}
		if (io.in_eof && !calls && cave_io_done(&io))
			break;
		n = cave_io_pollfds(&io, pf);
		for (int i = 0; i < n; i++) {
			wf[i].fd = pf[i].fd;
			wf[i].events = pf[i].events;
			wf[i].revents = 0;
		}
		curl_multi_poll(multi, wf, (unsigned)n, (int)(next - t) + 1, NULL);
		for (int i = 0; i < n; i++)
			pf[i].revents = wf[i].revents;
		if (cave_io_service(&io, pf, n, on_line, NULL, &e) < 0) {
			cave_warn("%s", e.msg);
			fail_with(CAVE_EX_DATA);
			break;
		}
		curl_multi_perform(multi, &still);
		while ((m = curl_multi_info_read(multi, &still))) {
			struct call *c = NULL;
			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&c);
			if (c)
				settle_attempt(c, m->data.result);
		}
	}
	if (calls)
		abort_all(got_signal);
	cave_io_drain(&io);
	cave_io_free(&io);
	curl_multi_cleanup(multi);
	curl_global_cleanup();
	if (got_signal)
		return 128 + got_signal;
	return exit_code;
}

/* cave-sandbox: the ring's tool runner. Turns each tool.request into a
 * tool.result, running the tool contained (lib/sandbox*.c) or, on explicit
 * opt-in, on the host. Several tools run at once while the ring keeps
 * flowing: one poll loop over the ring and every tool's pipes. It never
 * runs a tool it cannot contain as asked: it answers with a refusal. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "digest.h"
#include "event.h"
#include "io.h"
#include "msg.h"
#include "paths.h"
#include "sandbox.h"

#define SRC "cave-sandbox"
#define MAX_JOBS 64

struct job {
	bool used;
	jv req;                 /* the request (owned) */
	struct cave_sbx_proc p;
	struct cave_capture cap;
	struct cave_sbx_report rep;
	size_t rep_got;
	bool out_eof, rep_eof, timed_out, aborted;
	int64_t start_ms, start_us, deadline_ms;
	enum cave_sbx_mode mode;
	bool write;
};

struct opts {
	enum cave_sbx_mode mode;
	const char *policy_path, *fs_path, *store, *slirp;
	size_t inline_max, keep_max;
	long timeout_ms;
	long jobs;
	struct cave_sbx_limits lim;
};

struct state {
	struct opts o;
	struct cave_io io;
	struct cave_emitter em;
	struct cave_policy *policy;
	struct cave_fs_view *view;
	struct cave_kernel k;
	struct cave_net net;    /* what network: true tools get */
	struct job jobs[MAX_JOBS];
	jv pending;             /* requests waiting for a free slot */
	int running;
	bool aborting;
	const char *tmpdir;
};

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t now_ms(void)
{
	return now_us() / 1000;
}

static _Noreturn void usage(int code)
{
	fprintf(code ? stderr : stdout,
		"usage: cave-sandbox [--mode required|host] [--policy FILE] [--fs-policy FILE]\n"
		"                    [--store DIR] [--inline-max BYTES] [--keep-max BYTES]\n"
		"                    [--timeout-ms N] [--jobs N] [--cpu-sec N] [--mem-mb N]\n"
		"                    [--fsize-mb N] [--nofile N] [--nproc N] [--tmp-mb N]\n"
		"                    [--slirp4netns PROGRAM]\n"
		"Reads events on stdin; runs each tool.request contained and writes a\n"
		"tool.result after it; passes every other event through.\n");
	exit(code);
}

static long num(const char *opt, const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		cave_die(CAVE_EX_USAGE, "%s: expected a number from %ld to %ld, got '%s'",
			 opt, min, max, s);
	return v;
}

static void parse_opts(struct opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{"mode", 1, 0, 'm'}, {"policy", 1, 0, 'p'}, {"fs-policy", 1, 0, 'f'},
		{"store", 1, 0, 's'}, {"inline-max", 1, 0, 'i'}, {"keep-max", 1, 0, 'k'},
		{"timeout-ms", 1, 0, 't'}, {"jobs", 1, 0, 'j'}, {"cpu-sec", 1, 0, 'C'},
		{"mem-mb", 1, 0, 'M'}, {"fsize-mb", 1, 0, 'F'}, {"nofile", 1, 0, 'N'},
		{"nproc", 1, 0, 'P'}, {"tmp-mb", 1, 0, 'T'}, {"slirp4netns", 1, 0, 'S'},
		{"help", 0, 0, 'h'},
		{0, 0, 0, 0}
	};
	int c;

	memset(o, 0, sizeof *o);
	o->mode = CAVE_SBX_REQUIRED;
	o->store = ".caveman/blobs";
	o->slirp = "slirp4netns";
	o->inline_max = 32768;
	o->keep_max = (size_t)64 << 20;
	o->timeout_ms = 30000;
	o->jobs = 8;
	cave_sbx_limits_default(&o->lim);
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (strcmp(optarg, "required") == 0)
				o->mode = CAVE_SBX_REQUIRED;
			else if (strcmp(optarg, "host") == 0)
				o->mode = CAVE_SBX_HOST;
			else
				cave_die(CAVE_EX_USAGE, "--mode: expected required or host, got '%s'",
					 optarg);
			break;
		case 'p': o->policy_path = optarg; break;
		case 'f': o->fs_path = optarg; break;
		case 's': o->store = optarg; break;
		case 'i': o->inline_max = (size_t)num("--inline-max", optarg, 0, 1L << 30); break;
		case 'k': o->keep_max = (size_t)num("--keep-max", optarg, 0, 1L << 40); break;
		case 't': o->timeout_ms = num("--timeout-ms", optarg, 1, 86400000L); break;
		case 'j': o->jobs = num("--jobs", optarg, 1, MAX_JOBS); break;
		case 'C': o->lim.cpu_sec = num("--cpu-sec", optarg, 1, 86400); break;
		case 'M': o->lim.mem_mb = num("--mem-mb", optarg, 16, 1L << 20); break;
		case 'F': o->lim.fsize_mb = num("--fsize-mb", optarg, 1, 1L << 20); break;
		case 'N': o->lim.nofile = num("--nofile", optarg, 16, 1L << 20); break;
		case 'P': o->lim.nproc = num("--nproc", optarg, 2, 1L << 20); break;
		case 'T': o->lim.tmp_mb = num("--tmp-mb", optarg, 1, 1L << 20); break;
		case 'S': o->slirp = optarg; break;
		case 'h': usage(0);
		default: usage(CAVE_EX_USAGE);
		}
	}
	if (optind != argc)
		usage(CAVE_EX_USAGE);
}

/* Loads the policies once, so every tool only loads compiled BPF. */
static void load_policies(struct state *st)
{
	/* found paths live as long as the program: no allocation to leak */
	static char policy_buf[4096], fs_buf[4096];
	cave_err e;

	st->policy = cave_xcalloc(1, sizeof *st->policy);
	st->view = cave_xcalloc(1, sizeof *st->view);
	if (!st->o.policy_path) {
		if (cave_data_path("sandbox/default.policy", policy_buf, sizeof policy_buf) != 0)
			cave_die(CAVE_EX_CONFIG, "cannot find 'sandbox/default.policy'");
		st->o.policy_path = policy_buf;
	}
	if (!st->o.fs_path) {
		if (cave_data_path("sandbox/fs.policy", fs_buf, sizeof fs_buf) != 0)
			cave_die(CAVE_EX_CONFIG, "cannot find 'sandbox/fs.policy'");
		st->o.fs_path = fs_buf;
	}
	if (cave_policy_load(st->policy, st->o.policy_path, &e) != 0 ||
	    cave_fs_view_load(st->view, st->o.fs_path, &e) != 0)
		cave_die(CAVE_EX_CONFIG, "%s", e.msg);
	if (st->k.seccomp && cave_policy_compile(st->policy, st->k.seccomp_notify, &e) != 0)
		cave_die(CAVE_EX_CONFIG, "%s", e.msg);
}

static jv sandbox_info(const struct state *st, enum cave_sbx_mode mode, bool write,
		       bool network, bool host_loopback)
{
	jv o = jv_object();

	o = jv_object_set(o, jv_string("mode"),
			  jv_string(mode == CAVE_SBX_HOST ? "host" : "required"));
	o = jv_object_set(o, jv_string("effect"), jv_string(write ? "write" : "read"));
	o = jv_object_set(o, jv_string("network"), jv_bool(network));
	if (host_loopback)
		o = jv_object_set(o, jv_string("host_loopback"), jv_true());
	if (mode == CAVE_SBX_REQUIRED) {
		o = jv_object_set(o, jv_string("landlock_abi"), jv_number(st->k.landlock_abi));
		o = jv_object_set(o, jv_string("policy"), jv_string(st->policy->name));
	}
	return o;
}

/* A tool.result answering req (borrowed); fields added by the caller. */
static jv result_base(struct state *st, jv req)
{
	jv ev = cave_event_new("tool.result", SRC);
	const char *s;

	cave_emitter_follow(&st->em, req);
	ev = cave_emitter_stamp(&st->em, ev);
	if ((s = cave_jv_str(req, "id", NULL)))
		ev = jv_object_set(ev, jv_string("id"), jv_string(s));
	if ((s = cave_jv_str(req, "call_id", NULL)))
		ev = jv_object_set(ev, jv_string("call_id"), jv_string(s));
	if ((s = cave_jv_str(req, "name", NULL)))
		ev = jv_object_set(ev, jv_string("name"), jv_string(s));
	return ev;
}

static jv denial(const char *code, const char *msg)
{
	jv d = jv_object();

	d = jv_object_set(d, jv_string("code"), jv_string(code));
	return jv_object_set(d, jv_string("message"), jv_string(msg));
}

/* Answers req (borrowed) with a refusal: the tool did not run. */
static void refuse(struct state *st, jv req, const char *code, const char *msg)
{
	jv ev = cave_event_tool_unrun(result_base(st, req), req, denial(code, msg));
	cave_io_emit(&st->io, ev);
}

static bool ancestry_required(jv req)
{
	jv a = jv_object_get(jv_copy(req), jv_string("sandbox_ancestry"));
	bool found = false;

	if (jv_get_kind(a) == JV_KIND_ARRAY) {
		jv_array_foreach(a, i, m) {
			if (jv_get_kind(m) == JV_KIND_STRING &&
			    strcmp(jv_string_value(m), "required") == 0)
				found = true;
			jv_free(m);
		}
	}
	jv_free(a);
	return found || strcmp(cave_jv_str(req, "sandbox_parent", ""), "required") == 0;
}

/* Reads the request's boolean key (req borrowed) into *out; absent or
 * null is false. Returns false when it is there and not a boolean. */
static bool flag(jv req, const char *key, bool *out)
{
	jv v = jv_object_get(jv_copy(req), jv_string(key));
	jv_kind k = jv_get_kind(v);

	jv_free(v);
	*out = k == JV_KIND_TRUE;
	return k == JV_KIND_TRUE || k == JV_KIND_FALSE || k == JV_KIND_NULL ||
	       k == JV_KIND_INVALID;
}

/* Starts req (consumed) in slot j, or answers it with a refusal. */
static void start(struct state *st, struct job *j, jv req)
{
	struct cave_sbx_spec s;
	const char *effect = cave_jv_str(req, "effect", NULL);
	const char *mode = cave_jv_str(req, "sandbox", NULL);
	char ws[4096], cmd[4096], *input = NULL;
	jv in;
	cave_err e;
	int64_t t;

	memset(&s, 0, sizeof s);
	s.mode = st->o.mode;
	if (mode && strcmp(mode, "host") == 0)
		s.mode = CAVE_SBX_HOST;
	else if (mode && strcmp(mode, "required") == 0)
		s.mode = CAVE_SBX_REQUIRED;
	else if (mode) {
		refuse(st, req, "cave_sandbox_bad_request",
		       "sandbox must be \"required\" or \"host\"");
		goto out;
	}
	if (!effect || (strcmp(effect, "read") != 0 && strcmp(effect, "write") != 0)) {
		refuse(st, req, "cave_sandbox_no_effect",
		       "tool.request must declare effect \"read\" or \"write\"");
		goto out;
	}
	s.write = strcmp(effect, "write") == 0;
	if (s.mode == CAVE_SBX_HOST && ancestry_required(req)) {
		refuse(st, req, "cave_host_sandbox_nested_under_required",
		       "host sandbox refused under a required ancestor");
		goto out;
	}
	if (st->aborting) {
		refuse(st, req, "cave_sandbox_aborted", "aborted before the tool started");
		goto out;
	}
	if (!flag(req, "network", &s.network) || !flag(req, "host_loopback", &s.host_loopback) ||
	    (s.host_loopback && !s.network)) {
		refuse(st, req, "cave_sandbox_bad_request", "network and host_loopback must be "
		       "true or false, and host_loopback needs network");
		goto out;
	}
	if (s.mode == CAVE_SBX_REQUIRED && st->k.missing[0]) {
		char msg[400];

		snprintf(msg, sizeof msg, "required sandbox unavailable: the kernel "
			 "does not offer %s", st->k.missing);
		refuse(st, req, "cave_sandbox_unavailable", msg);
		goto out;
	}
	if (s.mode == CAVE_SBX_REQUIRED && s.network && st->net.missing[0]) {
		char msg[400];

		snprintf(msg, sizeof msg, "network: true needs a user-mode network that "
			 "keeps the host's loopback out; missing %s, so the tool does "
			 "not run", st->net.missing);
		refuse(st, req, "cave_sandbox_unavailable", msg);
		goto out;
	}
	if (cave_sbx_resolve(cave_jv_str(req, "workspace", "."),
			     cave_jv_str(req, "command", NULL), ws, cmd, &e) != 0) {
		refuse(st, req, e.code, e.msg);
		goto out;
	}
	in = jv_object_get(jv_copy(req), jv_string("input"));
	if (jv_get_kind(in) == JV_KIND_INVALID) {
		jv_free(in);
		in = jv_null();
	}
	in = jv_dump_string(in, 0);
	input = cave_xstrdup(jv_string_value(in));
	jv_free(in);
	s.command = cmd;
	s.workspace = ws;
	s.input = input;
	s.input_len = strlen(input);
	s.lim = st->o.lim;
	s.policy = st->policy;
	s.view = st->view;
	s.landlock_abi = st->k.landlock_abi;
	s.scratch_parent = st->tmpdir;
	s.slirp = st->net.slirp;
	memset(j, 0, sizeof *j);
	j->start_us = now_us();
	j->start_ms = j->start_us / 1000;
	if (cave_sbx_spawn(&s, &j->p, &e) != 0) {
		refuse(st, req, e.code, e.msg);
		goto out;
	}
	t = cave_jv_int(req, "timeout_ms", st->o.timeout_ms);
	if (t <= 0 || t > 86400000)
		t = st->o.timeout_ms;
	j->used = true;
	j->req = req;
	req = jv_invalid();
	j->mode = s.mode;
	j->write = s.write;
	j->deadline_ms = j->start_ms + t;
	cave_capture_init(&j->cap, st->o.inline_max, st->o.keep_max, st->o.store);
	st->running++;
out:
	free(input);
	jv_free(req);
}

static jv denied_rules(const struct state *st, const struct cave_sbx_report *r)
{
	jv a = jv_array();

	for (int i = 0; i < r->ndenials && i < CAVE_SBX_MAX_DENIALS; i++) {
		jv d = jv_object();
		char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE,
							      r->denials[i].nr);
		int ri = r->denials[i].rule;

		d = jv_object_set(d, jv_string("rule"),
				  jv_string(ri >= 0 && (size_t)ri < st->policy->n ?
					    st->policy->rules[ri].text : "?"));
		d = jv_object_set(d, jv_string("syscall"), jv_string(name ? name : "?"));
		d = jv_object_set(d, jv_string("count"), jv_number(r->denials[i].count));
		d = jv_object_set(d, jv_string("action"),
				  jv_string(r->denials[i].killed ? "kill" : "errno"));
		free(name);
		a = jv_array_append(a, d);
	}
	return a;
}

/* The job's tool is gone and its pipes are drained: answer. */
static void finish(struct state *st, struct job *j)
{
	struct cave_sbx_report *r = &j->rep;
	bool have = j->rep_got == sizeof *r && r->magic == CAVE_SBX_REPORT_MAGIC;
	long pids_refused = j->p.cgroup[0] ? cave_cgroup_pids_refused(j->p.cgroup) : 0;
	char digest[CAVE_SHA256_HEX], msg[400], netlog[160] = "";
	bool stored = false, truncated;
	jv ev = result_base(st, j->req), den = jv_null();
	int sup_status, sig = 0;

	if (have && strncmp(r->what, "network", 7) == 0)
		cave_net_log_tail(j->p.net_log, netlog, sizeof netlog);
	cave_sbx_finish(&j->p, &sup_status);
	cave_capture_finish(&j->cap, digest, &stored);
	truncated = j->cap.size > j->cap.inl_len;
	if (have && r->started) {
		if (WIFEXITED(r->status))
			ev = jv_object_set(ev, jv_string("exit"), jv_number(WEXITSTATUS(r->status)));
		else {
			ev = jv_object_set(ev, jv_string("exit"), jv_null());
			sig = WTERMSIG(r->status);
		}
	} else {
		ev = jv_object_set(ev, jv_string("exit"), jv_null());
		if (!have || !r->what[0])
			sig = SIGKILL;
	}
	if (sig) {
		const char *abbrev = sigabbrev_np(sig);
		char name[32];

		snprintf(name, sizeof name, "SIG%s", abbrev ? abbrev : "?");
		ev = jv_object_set(ev, jv_string("signal"), jv_string(name));
	} else
		ev = jv_object_set(ev, jv_string("signal"), jv_null());
	ev = jv_object_set(ev, jv_string("ms"), jv_number((double)(now_ms() - j->start_ms)));
	ev = jv_object_set(ev, jv_string("us"), jv_number((double)(now_us() - j->start_us)));
	ev = jv_object_set(ev, jv_string("output"),
			   jv_string_sized(j->cap.inl, (int)j->cap.inl_len));
	ev = jv_object_set(ev, jv_string("truncated"), jv_bool(truncated));
	ev = jv_object_set(ev, jv_string("size"), jv_number((double)j->cap.size));
	ev = jv_object_set(ev, jv_string("digest"), jv_string(digest));
	if (truncated)
		ev = jv_object_set(ev, jv_string("stored"), jv_bool(stored));
	ev = jv_object_set(ev, jv_string("timed_out"), jv_bool(j->timed_out));

	if (have && r->what[0]) {
		snprintf(msg, sizeof msg, "%s: %s%s%s%s", r->what, strerror(r->err),
			 netlog[0] ? " (slirp4netns: " : "", netlog, netlog[0] ? ")" : "");
		den = denial(strcmp(r->what, "execute the tool") == 0 ?
			     "cave_sandbox_exec_failed" : "cave_sandbox_unavailable", msg);
	} else if (j->aborted) {
		den = denial("cave_sandbox_aborted", "the tool was aborted and its tree killed");
	} else if (pids_refused > 0 && j->timed_out) {
		/* a fork bomb hangs until the timeout: the limit is the news */
		snprintf(msg, sizeof msg, "process limit: pids.max %ld reached, %ld forks "
			 "refused; the tool tree was killed at its %lld ms timeout",
			 st->o.lim.nproc, pids_refused,
			 (long long)(j->deadline_ms - j->start_ms));
		den = denial("cave_sandbox_pids_limit", msg);
	} else if (j->timed_out) {
		snprintf(msg, sizeof msg, "timeout: the tool tree was killed after %lld ms",
			 (long long)(j->deadline_ms - j->start_ms));
		den = denial("cave_sandbox_timeout", msg);
	} else if (have && r->ndenials) {
		snprintf(msg, sizeof msg, "the seccomp policy '%s' refused a system call",
			 st->policy->name);
		den = denial("cave_sandbox_seccomp", msg);
	} else if (pids_refused > 0) {
		snprintf(msg, sizeof msg, "process limit: pids.max %ld reached, %ld forks "
			 "refused", st->o.lim.nproc, pids_refused);
		den = denial("cave_sandbox_pids_limit", msg);
	} else if (sig == SIGXCPU || (sig == SIGKILL && have && r->started && j->mode == CAVE_SBX_REQUIRED)) {
		den = denial("cave_sandbox_rlimit", sig == SIGXCPU ? "cpu time limit" :
			     "killed: cpu time limit");
	} else if (sig == SIGXFSZ) {
		den = denial("cave_sandbox_rlimit", "file size limit");
	}
	if (jv_get_kind(den) == JV_KIND_OBJECT && have && r->ndenials)
		den = jv_object_set(den, jv_string("rules"), denied_rules(st, r));
	if (jv_get_kind(den) == JV_KIND_OBJECT && pids_refused > 0)
		den = jv_object_set(den, jv_string("pids_refused"), jv_number((double)pids_refused));
	ev = jv_object_set(ev, jv_string("denied"), den);
	ev = jv_object_set(ev, jv_string("sandbox"),
			   sandbox_info(st, j->mode, j->write,
					cave_jv_bool(j->req, "network", false),
					cave_jv_bool(j->req, "host_loopback", false)));
	cave_io_emit(&st->io, ev);
	cave_capture_free(&j->cap);
	jv_free(j->req);
	memset(j, 0, sizeof *j);
	st->running--;
}

static struct job *free_slot(struct state *st)
{
	if (st->running >= st->o.jobs)
		return NULL;
	for (int i = 0; i < MAX_JOBS; i++)
		if (!st->jobs[i].used)
			return &st->jobs[i];
	return NULL;
}

static void abort_id(struct state *st, const char *id)
{
	for (int i = 0; i < MAX_JOBS; i++) {
		struct job *j = &st->jobs[i];

		if (j->used && strcmp(cave_jv_str(j->req, "id", ""), id) == 0) {
			j->aborted = true;
			cave_sbx_kill(&j->p);
		}
	}
}

static int on_line(void *ctx, char *line, size_t len)
{
	struct state *st = ctx;
	struct cave_ev_head h;
	struct job *j;
	cave_err e;
	jv ev;
	char where[64];

	if (cave_event_peek(line, len, &h) != 0) {
		cave_io_pass(&st->io, line, len);
		return 0;
	}
	if (cave_event_src_is(&h, SRC))
		return 0; /* our own event, back from its lap */
	cave_io_pass(&st->io, line, len);
	if (!cave_event_type_is(&h, "tool.request") && !cave_event_type_is(&h, "tool.abort"))
		return 0;
	snprintf(where, sizeof where, "<stdin>:%lu", st->io.lineno);
	ev = cave_event_parse(line, len, where, &e);
	if (jv_get_kind(ev) == JV_KIND_INVALID) {
		cave_warn("%s", e.msg);
		jv_free(ev);
		return 0;
	}
	if (cave_event_type_is(&h, "tool.abort")) {
		abort_id(st, cave_jv_str(ev, "id", ""));
		jv_free(ev);
		return 0;
	}
	if ((j = free_slot(st)))
		start(st, j, ev);
	else
		st->pending = jv_array_append(st->pending, ev);
	return 0;
}

static void start_pending(struct state *st)
{
	struct job *j;

	while (jv_array_length(jv_copy(st->pending)) > 0 && (j = free_slot(st))) {
		jv req = jv_array_get(jv_copy(st->pending), 0);

		st->pending = jv_array_slice(st->pending, 1,
					     jv_array_length(jv_copy(st->pending)));
		start(st, j, req);
	}
}

static void service_job(struct job *j, const struct pollfd *out, const struct pollfd *rep)
{
	char buf[65536];
	ssize_t n;

	if (out && out->revents) {
		n = read(j->p.out_fd, buf, sizeof buf);
		if (n > 0)
			cave_capture_add(&j->cap, buf, (size_t)n);
		else if (n == 0 || (errno != EINTR && errno != EAGAIN))
			j->out_eof = true;
	}
	if (rep && rep->revents) {
		n = read(j->p.report_fd, (char *)&j->rep + j->rep_got,
			 j->rep_got < sizeof j->rep ? sizeof j->rep - j->rep_got : 1);
		if (n > 0 && j->rep_got + (size_t)n <= sizeof j->rep)
			j->rep_got += (size_t)n;
		else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			j->rep_eof = true;
	}
}

static int loop(struct state *st, int sigfd)
{
	struct pollfd pf[3 + 2 * MAX_JOBS];
	int idx[2 * MAX_JOBS][2];
	int exit_sig = 0;
	cave_err e;

	for (;;) {
		int n, ni, timeout = -1;
		int64_t now = now_ms();

		if (st->running == 0 && jv_array_length(jv_copy(st->pending)) == 0 &&
		    (cave_io_done(&st->io) || (st->aborting && st->io.in_eof)))
			break;
		if (st->io.out_closed && !st->aborting) {
			/* nobody listens for results: abort what runs */
			st->aborting = true;
			for (int i = 0; i < MAX_JOBS; i++)
				if (st->jobs[i].used) {
					st->jobs[i].aborted = true;
					cave_sbx_kill(&st->jobs[i].p);
				}
		}
		if (st->io.out_closed && st->running == 0)
			break;
		n = cave_io_pollfds(&st->io, pf);
		ni = n;
		pf[n].fd = sigfd;
		pf[n].events = POLLIN;
		pf[n++].revents = 0;
		for (int i = 0; i < MAX_JOBS; i++) {
			struct job *j = &st->jobs[i];

			idx[i][0] = idx[i][1] = -1;
			if (!j->used)
				continue;
			if (!j->out_eof) {
				idx[i][0] = n;
				pf[n].fd = j->p.out_fd;
				pf[n].events = POLLIN;
				pf[n++].revents = 0;
			}
			if (!j->rep_eof) {
				idx[i][1] = n;
				pf[n].fd = j->p.report_fd;
				pf[n].events = POLLIN;
				pf[n++].revents = 0;
			}
			if (!j->timed_out && !j->aborted) {
				int64_t left = j->deadline_ms - now;

				if (left < 0)
					left = 0;
				if (timeout < 0 || left < timeout)
					timeout = (int)left;
			}
		}
		if (poll(pf, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			cave_die(CAVE_EX_SOFTWARE, "poll:");
		}
		if (pf[ni].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
				exit_sig = (int)si.ssi_signo;
				st->aborting = true;
				st->io.in_eof = true; /* read no more requests */
				for (int i = 0; i < MAX_JOBS; i++)
					if (st->jobs[i].used) {
						st->jobs[i].aborted = true;
						cave_sbx_kill(&st->jobs[i].p);
					}
				while (jv_array_length(jv_copy(st->pending)) > 0) {
					jv r = jv_array_get(jv_copy(st->pending), 0);

					st->pending = jv_array_slice(st->pending, 1,
								     jv_array_length(jv_copy(st->pending)));
					refuse(st, r, "cave_sandbox_aborted",
					       "aborted before the tool started");
					jv_free(r);
				}
			}
		}
		if (cave_io_service(&st->io, pf, ni, on_line, st, &e) < 0)
			cave_die(e.code[0] == 'e' ? CAVE_EX_DATA : CAVE_EX_IO, "%s", e.msg);
		now = now_ms();
		for (int i = 0; i < MAX_JOBS; i++) {
			struct job *j = &st->jobs[i];

			if (!j->used)
				continue;
			service_job(j, idx[i][0] >= 0 ? &pf[idx[i][0]] : NULL,
				    idx[i][1] >= 0 ? &pf[idx[i][1]] : NULL);
			if (!j->timed_out && !j->aborted && now >= j->deadline_ms) {
				j->timed_out = true;
				cave_sbx_kill(&j->p);
			}
			if (j->out_eof && j->rep_eof)
				finish(st, j);
		}
		start_pending(st);
		cave_sbx_reap(false);
	}
	cave_io_drain(&st->io);
	cave_sbx_reap(true);
	return exit_sig ? 128 + exit_sig : 0;
}

int main(int argc, char **argv)
{
	struct state st;
	sigset_t sigs;
	int sigfd, rc;

	cave_set_prog(argv[0]);
	memset(&st, 0, sizeof st);
	cave_emitter_init(&st.em, SRC); /* reads CAVE_SEQ_FROM before the scrub */
	/* no credential of ours reaches a tool's image or /proc */
	cave_env_scrub_self();
	parse_opts(&st.o, argc, argv);
	st.tmpdir = getenv("TMPDIR");
	if (!st.tmpdir || st.tmpdir[0] != '/')
		st.tmpdir = "/tmp";
	cave_kernel_probe(&st.k);
	cave_net_probe(&st.net, st.o.slirp);
	load_policies(&st);
	st.pending = jv_array();
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	if ((sigfd = signalfd(-1, &sigs, SFD_CLOEXEC)) < 0)
		cave_die(CAVE_EX_SOFTWARE, "signalfd:");
	cave_io_init(&st.io, 0, 1);
	rc = loop(&st, sigfd);
	cave_io_free(&st.io);
	jv_free(st.pending);
	cave_policy_free(st.policy);
	cave_fs_view_free(st.view);
	free(st.policy);
	free(st.view);
	close(sigfd);
	if (rc == 0)
		rc = cave_close_stdout();
	return rc;
}

/* sandbox_policy.c: the seccomp policy of the sandbox/ .policy files, from text to
 * classic BPF. It interprets the rules and compiles them once; it never
 * loads a filter itself (the spawn does, in the child) and never decides
 * by itself what is denied: every rule comes from the policy file. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "sandbox.h"

#define POLICY_FILE_MAX ((size_t)1 << 20)

struct named { const char *name; uint64_t value; };

/* Constants a policy may name instead of a number. */
static const struct named consts[] = {
	{"AF_UNIX", AF_UNIX}, {"AF_INET", AF_INET}, {"AF_INET6", AF_INET6},
	{"AF_NETLINK", AF_NETLINK}, {"AF_PACKET", AF_PACKET},
	{"AF_KEY", AF_KEY}, {"AF_VSOCK", 40}, {"AF_BLUETOOTH", 31},
	{"AF_CAN", 29}, {"AF_ALG", 38}, {"AF_XDP", 44},
	{"SOCK_STREAM", SOCK_STREAM}, {"SOCK_DGRAM", SOCK_DGRAM},
	{"SOCK_RAW", SOCK_RAW}, {"SOCK_PACKET", SOCK_PACKET},
	{"CLONE_NEWNS", CLONE_NEWNS}, {"CLONE_NEWUSER", CLONE_NEWUSER},
	{"CLONE_NEWPID", CLONE_NEWPID}, {"CLONE_NEWNET", CLONE_NEWNET},
	{"CLONE_NEWIPC", CLONE_NEWIPC}, {"CLONE_NEWUTS", CLONE_NEWUTS},
	{"CLONE_NEWCGROUP", CLONE_NEWCGROUP}, {"CLONE_NEWTIME", 0x80},
	{"TIOCSTI", 0x5412}, {"TIOCLINUX", 0x541C},
};

static const struct named errnos[] = {
	{"EPERM", EPERM}, {"EACCES", EACCES}, {"ENOSYS", ENOSYS},
	{"EAFNOSUPPORT", EAFNOSUPPORT}, {"EINVAL", EINVAL},
	{"ENOENT", ENOENT}, {"EPROTONOSUPPORT", EPROTONOSUPPORT},
};

static int lookup(const struct named *t, size_t n, const char *s, uint64_t *v)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(t[i].name, s) == 0) {
			*v = t[i].value;
			return 0;
		}
	}
	return -1;
}

static int parse_value(const char *s, uint64_t *v)
{
	char *end;
	unsigned long long x;

	if (lookup(consts, sizeof consts / sizeof *consts, s, v) == 0)
		return 0;
	if (*s == '\0' || *s == '-')
		return -1;
	errno = 0;
	x = strtoull(s, &end, 0);
	if (errno || *end)
		return -1;
	*v = x;
	return 0;
}

#define MAX_TOKENS 24

/* Splits s into blank-separated words in place; returns how many. */
static size_t tokenize(char *s, char **tok, size_t max)
{
	size_t n = 0;

	for (;;) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s || n == max)
			return n;
		tok[n++] = s;
		while (*s && *s != ' ' && *s != '\t')
			s++;
		if (*s)
			*s++ = '\0';
	}
}

/* Parses an action at tok[*i]; advances *i. */
static int parse_action(char **tok, size_t n, size_t *i,
			enum cave_pol_action *act, int *err)
{
	uint64_t v;

	if (*i >= n)
		return -1;
	if (strcmp(tok[*i], "allow") == 0 || strcmp(tok[*i], "kill") == 0) {
		*act = tok[*i][0] == 'a' ? CAVE_POL_ALLOW : CAVE_POL_KILL;
		(*i)++;
		return 0;
	}
	if (strcmp(tok[*i], "errno") != 0 || *i + 1 >= n)
		return -1;
	if (lookup(errnos, sizeof errnos / sizeof *errnos, tok[*i + 1], &v) != 0) {
		char *end;
		long x;

		errno = 0;
		x = strtol(tok[*i + 1], &end, 10);
		if (errno || *end || x <= 0 || x > 4095)
			return -1;
		v = (uint64_t)x;
	}
	*act = CAVE_POL_ERRNO;
	*err = (int)v;
	*i += 2;
	return 0;
}

/* "argN OP VALUE" or "argN & MASK [== VALUE]" at tok[*i]; advances *i. */
static int parse_cond(char **tok, size_t n, size_t *i, struct cave_pol_arg *a)
{
	const char *op;
	char *end;
	long idx;

	if (*i + 3 > n || strncmp(tok[*i], "arg", 3) != 0)
		return -1;
	errno = 0;
	idx = strtol(tok[*i] + 3, &end, 10);
	if (errno || *end || end == tok[*i] + 3 || idx < 0 || idx > 5)
		return -1;
	a->idx = (unsigned)idx;
	op = tok[*i + 1];
	if (parse_value(tok[*i + 2], &a->a) != 0)
		return -1;
	*i += 3;
	if (strcmp(op, "&") == 0) {
		a->op = SCMP_CMP_MASKED_EQ;
		a->b = a->a;
		if (*i < n && strcmp(tok[*i], "==") == 0) {
			if (*i + 1 >= n || parse_value(tok[*i + 1], &a->b) != 0)
				return -1;
			*i += 2;
		}
		return 0;
	}
	if (strcmp(op, "==") == 0)
		a->op = SCMP_CMP_EQ;
	else if (strcmp(op, "!=") == 0)
		a->op = SCMP_CMP_NE;
	else if (strcmp(op, "<") == 0)
		a->op = SCMP_CMP_LT;
	else if (strcmp(op, "<=") == 0)
		a->op = SCMP_CMP_LE;
	else if (strcmp(op, ">") == 0)
		a->op = SCMP_CMP_GT;
	else if (strcmp(op, ">=") == 0)
		a->op = SCMP_CMP_GE;
	else
		return -1;
	return 0;
}

static int parse_line(struct cave_policy *p, char *line, const char *name,
		      unsigned lineno, cave_err *e)
{
	struct cave_pol_rule r;
	char *tok[MAX_TOKENS], *colon;
	char text[96];
	size_t n, i = 0;

	while (*line == ' ' || *line == '\t')
		line++;
	n = strlen(line);
	while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
		line[--n] = '\0';
	if (!*line || *line == '#')
		return 0;
	snprintf(text, sizeof text, "%s", line);
	if (strncmp(line, "@default", 8) == 0) {
		n = tokenize(line + 8, tok, MAX_TOKENS);
		if (parse_action(tok, n, &i, &p->dflt, &p->dflt_err) != 0 || i != n)
			goto bad;
		return 0;
	}
	memset(&r, 0, sizeof r);
	snprintf(r.text, sizeof r.text, "%s", text);
	if (!(colon = strchr(line, ':')))
		goto bad;
	*colon = '\0';
	if (!*line || strspn(line, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(line))
		goto bad;
	n = tokenize(colon + 1, tok, MAX_TOKENS);
	if (parse_action(tok, n, &i, &r.action, &r.err) != 0)
		goto bad;
	if (i < n && strcmp(tok[i], "quiet") == 0) {
		if (r.action != CAVE_POL_ERRNO)
			goto bad;
		r.quiet = true;
		i++;
	}
	if (i < n) {
		if (strcmp(tok[i++], "if") != 0)
			goto bad;
		for (;;) {
			if (r.nargs == CAVE_POLICY_MAX_ARGS ||
			    parse_cond(tok, n, &i, &r.args[r.nargs]) != 0)
				goto bad;
			r.nargs++;
			if (i == n)
				break;
			if (strcmp(tok[i++], "&&") != 0)
				goto bad;
		}
	}
	r.nr = seccomp_syscall_resolve_name(line);
	if (r.nr == __NR_SCMP_ERROR)
		return cave_errf(e, "cave_sandbox_bad_policy",
				 "%s:%u: unknown system call '%s'", name, lineno, line);
	if (r.nr < 0) /* not a system call of this architecture */
		return 0;
	if (p->n == CAVE_POLICY_MAX_RULES)
		return cave_errf(e, "cave_sandbox_bad_policy",
				 "%s:%u: more than %d rules", name, lineno,
				 CAVE_POLICY_MAX_RULES);
	p->rules[p->n++] = r;
	return 0;
bad:
	return cave_errf(e, "cave_sandbox_bad_policy",
			 "%s:%u: cannot parse rule '%s'", name, lineno, text);
}

int cave_policy_parse(struct cave_policy *p, const char *name,
		      const char *text, size_t len, cave_err *e)
{
	const char *base = strrchr(name, '/');
	unsigned lineno = 0;
	size_t i = 0;

	memset(p, 0, sizeof *p);
	p->dflt = CAVE_POL_ALLOW;
	snprintf(p->name, sizeof p->name, "%s", base ? base + 1 : name);
	while (i < len) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
		char line[512];

		lineno++;
		if (n >= sizeof line)
			return cave_errf(e, "cave_sandbox_bad_policy",
					 "%s:%u: line too long", name, lineno);
		memcpy(line, text + i, n);
		line[n] = '\0';
		if (parse_line(p, line, name, lineno, e) != 0)
			return -1;
		i += n + 1;
	}
	return 0;
}

int cave_policy_read(struct cave_buf *text, const char *path, size_t max, cave_err *e)
{
	cave_buf_init(text, max - 1);
	if (cave_buf_read_file(text, path) < 0) {
		cave_errf(e, "cave_sandbox_bad_policy", "cannot read '%s': %s", path,
			  errno == ENOBUFS ? "too large" : strerror(errno));
		cave_buf_free(text);
		return -1;
	}
	return 0;
}

int cave_policy_load(struct cave_policy *p, const char *path, cave_err *e)
{
	struct cave_buf text;
	int ret;

	if (cave_policy_read(&text, path, POLICY_FILE_MAX, e) < 0)
		return -1;
	ret = cave_policy_parse(p, path, text.data ? text.data : "", text.len, e);
	cave_buf_free(&text);
	return ret;
}

static uint32_t scmp_action(enum cave_pol_action a, int err)
{
	switch (a) {
	case CAVE_POL_ALLOW: return SCMP_ACT_ALLOW;
	case CAVE_POL_ERRNO: return SCMP_ACT_ERRNO((uint32_t)err);
	case CAVE_POL_KILL: break;
	}
	return SCMP_ACT_KILL_PROCESS;
}

int cave_policy_compile(struct cave_policy *p, bool notify, cave_err *e)
{
	scmp_filter_ctx ctx = NULL;
	uint32_t dflt = scmp_action(p->dflt, p->dflt_err);
	int fd = -1, ret = -1, rc;
	struct stat st;

	if (!(ctx = seccomp_init(dflt))) {
		cave_errf(e, "cave_sandbox_unavailable", "seccomp: cannot start a filter");
		goto out;
	}
	for (size_t i = 0; i < p->n; i++) {
		const struct cave_pol_rule *r = &p->rules[i];
		struct scmp_arg_cmp cmp[CAVE_POLICY_MAX_ARGS];
		uint32_t act = scmp_action(r->action, r->err);

		if (act == dflt)
			continue;
		if (notify && r->action != CAVE_POL_ALLOW && !r->quiet)
			act = SCMP_ACT_NOTIFY;
		for (unsigned j = 0; j < r->nargs; j++) {
			cmp[j].arg = r->args[j].idx;
			cmp[j].op = (enum scmp_compare)r->args[j].op;
			cmp[j].datum_a = r->args[j].a;
			cmp[j].datum_b = r->args[j].b;
		}
		rc = seccomp_rule_add_array(ctx, act, r->nr, r->nargs, cmp);
		if (rc < 0 && rc != -EEXIST) {
			cave_errf(e, "cave_sandbox_bad_policy",
				  "%s: cannot add rule '%s': %s", p->name, r->text,
				  strerror(-rc));
			goto out;
		}
	}
	if ((fd = memfd_create("cave-policy", MFD_CLOEXEC)) < 0 ||
	    (rc = seccomp_export_bpf(ctx, fd)) < 0 || fstat(fd, &st) < 0 ||
	    st.st_size <= 0 || st.st_size % 8 || st.st_size / 8 > 65535) {
		cave_errf(e, "cave_sandbox_unavailable", "seccomp: cannot compile '%s'",
			  p->name);
		goto out;
	}
	free(p->bpf);
	p->bpf = cave_xmalloc((size_t)st.st_size);
	if (pread(fd, p->bpf, (size_t)st.st_size, 0) != st.st_size) {
		cave_errf(e, "cave_sandbox_unavailable", "seccomp: cannot read the filter");
		goto out;
	}
	p->bpf_len = (unsigned short)(st.st_size / 8);
	p->notify = notify;
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	if (ctx)
		seccomp_release(ctx);
	return ret;
}

void cave_policy_free(struct cave_policy *p)
{
	free(p->bpf);
	p->bpf = NULL;
	p->bpf_len = 0;
}

static int arg_matches(const struct cave_pol_arg *a, uint64_t v)
{
	switch (a->op) {
	case SCMP_CMP_EQ: return v == a->a;
	case SCMP_CMP_NE: return v != a->a;
	case SCMP_CMP_LT: return v < a->a;
	case SCMP_CMP_LE: return v <= a->a;
	case SCMP_CMP_GT: return v > a->a;
	case SCMP_CMP_GE: return v >= a->a;
	case SCMP_CMP_MASKED_EQ: return (v & a->a) == a->b;
	default: return 0;
	}
}

int cave_policy_match(const struct cave_policy *p, int nr,
		      const uint64_t args[6])
{
	for (size_t i = 0; i < p->n; i++) {
		const struct cave_pol_rule *r = &p->rules[i];
		unsigned j;

		if (r->nr != nr)
			continue;
		for (j = 0; j < r->nargs; j++)
			if (!arg_matches(&r->args[j], args[r->args[j].idx]))
				break;
		if (j == r->nargs)
			return (int)i;
	}
	return -1;
}

/* test_sandbox_policy.c: the seccomp policy parser and matcher, the
 * filesystem view's carving of hidden paths, and the credential filter. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "sandbox.h"
#include "tap.h"

static void test_parse(void)
{
	static const char text[] =
		"# comment\n"
		"@default allow\n"
		"ptrace: kill\n"
		"mount: errno EPERM\n"
		"socket: errno EAFNOSUPPORT if arg0 == AF_PACKET\n"
		"socket: errno EPERM if arg0 == AF_INET && arg1 & 0xf == SOCK_RAW\n"
		"clone: errno EPERM if arg0 & CLONE_NEWUSER\n"
		"clone3: errno ENOSYS quiet\n"
		"   \n";
	struct cave_policy *p = calloc(1, sizeof *p);
	uint64_t a[6] = {0};
	cave_err e;

	is_int(cave_policy_parse(p, "t.policy", text, sizeof text - 1, &e), 0, "parses");
	is_int(p->n, 6, "six rules");
	ok(p->rules[5].quiet && !p->rules[4].quiet, "quiet flag");
	is_str(p->name, "t.policy", "keeps the name");
	is_int(p->dflt, CAVE_POL_ALLOW, "default allow");
	is_int(p->rules[0].action, CAVE_POL_KILL, "ptrace kills");
	is_int(p->rules[1].err, EPERM, "mount errno");
	is_str(p->rules[0].text, "ptrace: kill", "rule text kept for results");
	is_int(cave_policy_match(p, SYS_ptrace, a), 0, "ptrace matches rule 0");
	a[0] = AF_PACKET;
	is_int(cave_policy_match(p, SYS_socket, a), 2, "packet socket matches");
	a[0] = AF_INET;
	a[1] = SOCK_RAW | SOCK_CLOEXEC;
	is_int(cave_policy_match(p, SYS_socket, a), 3, "masked raw socket matches");
	a[1] = SOCK_STREAM;
	is_int(cave_policy_match(p, SYS_socket, a), -1, "tcp socket is allowed");
	a[0] = 0x10000000 | SIGCHLD; /* CLONE_NEWUSER */
	is_int(cave_policy_match(p, SYS_clone, a), 4, "clone with a new user ns");
	a[0] = SIGCHLD;
	is_int(cave_policy_match(p, SYS_clone, a), -1, "plain fork is allowed");
	is_int(cave_policy_match(p, SYS_read, a), -1, "read is allowed");
	is_int(cave_policy_compile(p, false, &e), 0, "compiles to BPF");
	ok(p->bpf_len > 10, "BPF has instructions");
	cave_policy_free(p);
	free(p);
}

static void test_errors(void)
{
	struct cave_policy *p = calloc(1, sizeof *p);
	cave_err e;

	is_int(cave_policy_parse(p, "b.policy", "nosuchcall_x: kill\n", 19, &e), -1,
	       "unknown syscall refused");
	ok(strstr(e.msg, "b.policy:1:") != NULL, "error names its place");
	is_int(cave_policy_parse(p, "b.policy", "ptrace: maybe\n", 14, &e), -1,
	       "unknown action refused");
	is_int(cave_policy_parse(p, "b.policy", "socket: errno EPERM if arg9 == 1\n", 33, &e),
	       -1, "bad argument index refused");
	is_str(e.code, "cave_sandbox_bad_policy", "error code");
	is_int(cave_policy_parse(p, "b.policy", "ptrace: kill quiet\n", 19, &e), -1,
	       "quiet only after errno");
	free(p);
}

static void test_fs_view(void)
{
	static const char text[] = "read /etc\nhide /etc/shadow\nrw /dev/null\nread /nonexistent-x\n";
	struct cave_fs_view *v = calloc(1, sizeof *v);
	int saw_shadow = 0, saw_etc = 0, saw_passwd = 0, saw_null = 0;
	cave_err e;

	is_int(cave_fs_view_parse(v, "fs.policy", text, sizeof text - 1, &e), 0, "fs view parses");
	for (size_t i = 0; i < v->n; i++) {
		saw_shadow |= strcmp(v->e[i].path, "/etc/shadow") == 0;
		saw_etc |= strcmp(v->e[i].path, "/etc") == 0;
		saw_passwd |= strcmp(v->e[i].path, "/etc/passwd") == 0;
		saw_null |= strcmp(v->e[i].path, "/dev/null") == 0 && v->e[i].write;
	}
	ok(!saw_shadow, "hidden path not granted");
	ok(!saw_etc, "the tree above a hidden path is not granted whole");
	ok(saw_passwd, "siblings of the hidden path are granted");
	ok(saw_null, "rw entry is writable");
	cave_fs_view_free(v);
	is_int(cave_fs_view_parse(v, "fs.policy", "read etc\n", 9, &e), -1, "relative path refused");
	free(v);
}

static void test_env(void)
{
	ok(cave_env_is_secret("ANTHROPIC_API_KEY=x"), "api key is secret");
	ok(cave_env_is_secret("CAVE_ANYTHING"), "CAVE_ is secret");
	ok(cave_env_is_secret("GITHUB_TOKEN=1"), "token is secret");
	ok(!cave_env_is_secret("LANG=C"), "LANG is not");
}

int main(void)
{
	test_parse();
	test_errors();
	test_fs_view();
	test_env();
	return tap_done();
}

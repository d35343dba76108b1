/* cave: the dispatcher. `cave VERB ARGS...` runs `cave-VERB ARGS...`
 * (git-style), looked up first beside this program, then on PATH. It does
 * one job and chain-loads the rest, so the child's status is cave's. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "msg.h"

static const char usage[] =
	"usage: cave VERB [ARGS...]\n"
	"\n"
	"verbs:\n"
	"  run       run an agent: the ring, the tool loop, journal and receipt\n"
	"  request   turn a prompt into run.start and call.request events\n"
	"  call      perform model calls (cave-call filter)\n"
	"  receipt   fold events into a receipt (cave-receipt filter)\n"
	"  budget    bound spend before it happens (cave-budget filter)\n"
	"  sandbox   run tool calls contained (cave-sandbox filter)\n"
	"  catalog   show the price catalog\n"
	"  doctor    report what this machine's kernel offers\n"
	"\n"
	"`cave VERB --help` tells more; README.md lists the exit codes.\n";

static int self_dir(char *out, size_t n)
{
	ssize_t r = readlink("/proc/self/exe", out, n - 1);
	char *slash;
	if (r <= 0)
		return -1;
	out[r] = '\0';
	slash = strrchr(out, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	return 0;
}

int main(int argc, char **argv)
{
	char dir[PATH_MAX], path[PATH_MAX + 128], name[96];
	const char *verb;
	cave_set_prog(argv[0]);
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? CAVE_EX_USAGE : 0;
	}
	verb = argv[1];
	if (!*verb || strchr(verb, '/') || strlen(verb) > 64 || verb[0] == '-')
		cave_die(CAVE_EX_USAGE, "'%s' is not a cave command; see 'cave --help'", verb);
	snprintf(name, sizeof name, "cave-%s", verb);
	argv[1] = name;
	if (self_dir(dir, sizeof dir) == 0) {
		snprintf(path, sizeof path, "%s/%s", dir, name);
		if (access(path, X_OK) == 0) {
			execv(path, argv + 1);
			cave_die(CAVE_EX_SOFTWARE, "cannot run '%s':", path);
		}
	}
	execvp(name, argv + 1);
	if (errno == ENOENT)
		cave_die(CAVE_EX_USAGE, "'%s' is not a cave command; see 'cave --help'", verb);
	cave_die(CAVE_EX_SOFTWARE, "cannot run '%s':", name);
}

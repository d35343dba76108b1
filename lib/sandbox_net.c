/* sandbox_net.c: the user-mode network of a tool that declares network:
 * true. It finds slirp4netns and /dev/net/tun, and starts slirp4netns on
 * the host side against the tool's network namespace. It must never start
 * slirp4netns without --disable-host-loopback unless the tool declared
 * host_loopback: the tool's network reaches the outside world, and the
 * host's loopback services only when the agent said so. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox.h"

#define TUN_PATH "/dev/net/tun"
#define LOG_MAX 65536 /* bytes of slirp4netns's stderr kept */

static bool executable(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* name as a path when it holds a '/', else the first match in PATH. */
static bool find_program(const char *name, char *out, size_t n)
{
	const char *path = getenv("PATH"), *p, *colon;

	if (strchr(name, '/'))
		return executable(name) && (size_t)snprintf(out, n, "%s", name) < n;
	for (p = path ? path : ""; *p; p = *colon ? colon + 1 : colon) {
		int len;

		colon = strchr(p, ':');
		if (!colon)
			colon = p + strlen(p);
		len = (int)(colon - p);
		if (len == 0 || p[0] != '/')
			continue; /* relative PATH entries are not trusted */
		if ((size_t)snprintf(out, n, "%.*s/%s", len, p, name) < n && executable(out))
			return true;
	}
	out[0] = '\0';
	return false;
}

void cave_net_probe(struct cave_net *n, const char *name)
{
	struct stat st;

	memset(n, 0, sizeof *n);
	if (!find_program(name, n->slirp, sizeof n->slirp))
		snprintf(n->missing, sizeof n->missing, "slirp4netns ('%.100s' %s)", name,
			 strchr(name, '/') ? "is not an executable" : "is not in PATH");
	n->tun = stat(TUN_PATH, &st) == 0 && S_ISCHR(st.st_mode) &&
		 access(TUN_PATH, R_OK | W_OK) == 0;
	if (!n->tun) {
		size_t k = strlen(n->missing);

		snprintf(n->missing + k, sizeof n->missing - k, "%s" TUN_PATH " (the tun "
			 "device)", k ? " and " : "");
	}
}

/* In the forked child: only the descriptors slirp4netns is told of,
 * stderr into the log, an empty environment. slirp4netns opens
 * /proc/PID/ns/{user,net} of the supervisor, which is still dumpable
 * until slirp4netns reports ready (an unprivileged slirp4netns could not
 * open them after). --enable-sandbox (its own mount namespace, every
 * capability but one dropped) only as root: unprivileged, it needs uid and
 * gid 0 mapped in the tool's user namespace, which maps the user to
 * itself; there it holds no capability in the host's namespaces anyway. */
static _Noreturn void exec_slirp(const char *slirp, pid_t target, bool host_loopback,
				 const int fds[3])
{
	char pid[24], *argv[10], *envp[] = { NULL };
	int n = 0;
	struct rlimit rl = { LOG_MAX, LOG_MAX };
	sigset_t none;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	snprintf(pid, sizeof pid, "%ld", (long)target);
	argv[n++] = (char *)slirp;
	argv[n++] = "--configure";
	if (!host_loopback)
		argv[n++] = "--disable-host-loopback";
	if (geteuid() == 0)
		argv[n++] = "--enable-sandbox";
	argv[n++] = "--enable-seccomp";
	argv[n++] = "--exit-fd=3";
	argv[n++] = "--ready-fd=4";
	argv[n++] = pid;
	argv[n++] = "tap0";
	argv[n] = NULL;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* a chatty slirp4netns gets EFBIG on its log, not unbounded memory */
	signal(SIGXFSZ, SIG_IGN);
	/* fds[] are all above 4 (moved there by the parent): no dup2 below
	 * overwrites one still to be copied */
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(fds[0], 2) < 0 ||
	    dup2(fds[1], 3) < 0 || dup2(fds[2], 4) < 0 || setrlimit(RLIMIT_FSIZE, &rl) != 0)
		_exit(127);
	if (syscall(SYS_close_range, 5, ~0U, 0) != 0)
		for (int fd = 5; fd < 1024; fd++)
			close(fd);
	execve(slirp, argv, envp);
	dprintf(2, "cannot execute '%s': %s\n", slirp, strerror(errno));
	_exit(127);
}

pid_t cave_net_start(const char *slirp, pid_t target, bool host_loopback, int exit_rd,
		     int ready_wr, int *log_fd, cave_err *e)
{
	int fds[3] = { -1, -1, -1 }; /* the log, exit_rd, ready_wr */
	pid_t pid = -1;

	*log_fd = memfd_create("cave-slirp4netns-log", MFD_CLOEXEC);
	if (*log_fd < 0 ||
	    (fds[0] = fcntl(*log_fd, F_DUPFD_CLOEXEC, 5)) < 0 ||
	    (fds[1] = fcntl(exit_rd, F_DUPFD_CLOEXEC, 5)) < 0 ||
	    (fds[2] = fcntl(ready_wr, F_DUPFD_CLOEXEC, 5)) < 0) {
		cave_errf(e, "cave_sandbox_unavailable", "network: cannot prepare "
			  "slirp4netns: %s", strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid == 0)
		exec_slirp(slirp, target, host_loopback, fds);
	if (pid < 0)
		cave_errf(e, "cave_sandbox_unavailable", "network: cannot start '%s': %s",
			  slirp, strerror(errno));
out:
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (pid < 0 && *log_fd >= 0) {
		close(*log_fd);
		*log_fd = -1;
	}
	return pid;
}

void cave_net_log_tail(int log_fd, char *buf, size_t n)
{
	char tail[512];
	struct stat st;
	off_t off;
	ssize_t got;
	char *end, *start;

	buf[0] = '\0';
	if (log_fd < 0 || n == 0 || fstat(log_fd, &st) != 0)
		return;
	off = st.st_size > (off_t)sizeof tail - 1 ? st.st_size - (off_t)sizeof tail + 1 : 0;
	got = pread(log_fd, tail, sizeof tail - 1, off);
	if (got <= 0)
		return;
	tail[got] = '\0';
	end = tail + got;
	while (end > tail && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
		*--end = '\0';
	start = end;
	while (start > tail && start[-1] != '\n')
		start--;
	for (char *c = start; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
			*c = '?';
	snprintf(buf, n, "%s", start);
}

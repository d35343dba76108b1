/* ring.c: starts the ring's member processes wired by pipes, signals and
 * reaps them. It never reads or writes an event and never kills a process
 * that is not a member it started. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ring.h"

void cave_ring_init(struct cave_ring *r)
{
	memset(r, 0, sizeof *r);
	r->to_ring = r->from_ring = -1;
}

int cave_ring_add(struct cave_ring *r, const char *const *argv, cave_err *e)
{
	struct cave_ring_member *m;
	size_t i;
	if (r->n >= CAVE_RING_MAX)
		return cave_errf(e, "ring", "the ring holds at most %d members", CAVE_RING_MAX);
	m = &r->m[r->n];
	memset(m, 0, sizeof *m);
	for (i = 0; argv[i]; i++) {
		if (i + 1 >= sizeof m->argv / sizeof m->argv[0]) {
			for (size_t j = 0; j < i; j++)
				free(m->argv[j]);
			return cave_errf(e, "ring", "too many arguments for '%s'", argv[0]);
		}
		m->argv[i] = cave_xstrdup(argv[i]);
	}
	m->argv[i] = NULL;
	r->n++;
	return 0;
}

int cave_ring_add_shell(struct cave_ring *r, const char *cmd, cave_err *e)
{
	const char *argv[] = { cmd, NULL };
	if (cave_ring_add(r, argv, e) < 0)
		return -1;
	r->m[r->n - 1].shell = true;
	return 0;
}

int cave_ring_find(const char *name, char *out, size_t n)
{
	char self[PATH_MAX], *slash, *path, *save = NULL, *dir;
	ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
	const char *env;
	int ret = -1;
	if (len > 0) {
		self[len] = '\0';
		if ((slash = strrchr(self, '/'))) {
			*slash = '\0';
			if ((size_t)snprintf(out, n, "%s/%s", self, name) < n &&
			    access(out, X_OK) == 0)
				return 0;
		}
	}
	env = getenv("PATH");
	if (!env)
		return -1;
	path = cave_xstrdup(env);
	for (dir = strtok_r(path, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		if ((size_t)snprintf(out, n, "%s/%s", *dir ? dir : ".", name) < n &&
		    access(out, X_OK) == 0) {
			ret = 0;
			break;
		}
	}
	free(path);
	return ret;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int cave_ring_start(struct cave_ring *r, cave_err *e)
{
	int head_in[2] = { -1, -1 }, prev_read = -1, ret = -1;
	size_t i;

	if (r->n == 0)
		return cave_errf(e, "ring", "the ring has no members");
	if (pipe2(head_in, O_CLOEXEC) < 0) /* the last member writes here */
		return cave_errf(e, "ring", "cannot make a pipe: %s", strerror(errno));
	for (i = 0; i < r->n; i++) {
		struct cave_ring_member *m = &r->m[i];
		int p[2] = { -1, -1 }, in_fd, out_fd;
		pid_t pid;
		if (i == 0) {
			if (pipe2(p, O_CLOEXEC) < 0) {
				cave_errf(e, "ring", "cannot make a pipe: %s", strerror(errno));
				goto out;
			}
			r->to_ring = p[1];
			in_fd = p[0];
		} else {
			in_fd = prev_read;
		}
		if (i + 1 == r->n) {
			out_fd = head_in[1];
			prev_read = -1;
		} else {
			int q[2];
			if (pipe2(q, O_CLOEXEC) < 0) {
				if (i == 0)
					close(in_fd);
				cave_errf(e, "ring", "cannot make a pipe: %s", strerror(errno));
				goto out;
			}
			out_fd = q[1];
			prev_read = q[0];
		}
		pid = fork();
		if (pid < 0) {
			close(in_fd);
			close(out_fd);
			if (out_fd == head_in[1])
				head_in[1] = -1;
			cave_errf(e, "ring", "cannot fork: %s", strerror(errno));
			goto out;
		}
		if (pid == 0) {
			sigset_t none;
			setpgid(0, r->pgid);
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
			signal(SIGPIPE, SIG_DFL);
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0)
				_exit(CAVE_EX_SOFTWARE);
			if (m->shell)
				execl("/bin/sh", "sh", "-c", m->argv[0], (char *)NULL);
			else
				execv(m->argv[0], m->argv);
			dprintf(2, "%s: cannot run '%s': %s\n", cave_prog, m->argv[0],
				strerror(errno));
			_exit(127);
		}
		if (r->pgid == 0)
			r->pgid = pid;
		setpgid(pid, r->pgid); /* both sides, to win the race */
		m->pid = pid;
		close(in_fd);
		close(out_fd);
		if (out_fd == head_in[1])
			head_in[1] = -1;
	}
	r->from_ring = head_in[0];
	head_in[0] = -1;
	ret = 0;
out:
	close_fd(&head_in[0]);
	close_fd(&head_in[1]);
	close_fd(&prev_read);
	if (ret < 0) {
		close_fd(&r->to_ring);
		cave_ring_signal(r, SIGKILL);
		cave_ring_reap(r, -1);
	}
	return ret;
}

void cave_ring_signal_one(struct cave_ring *r, size_t i, int sig)
{
	if (i < r->n && r->m[i].pid > 0 && !r->m[i].reaped)
		kill(r->m[i].pid, sig);
}

void cave_ring_signal(struct cave_ring *r, int sig)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->m[i].pid > 0 && !r->m[i].reaped)
			kill(r->m[i].pid, sig);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

size_t cave_ring_reap(struct cave_ring *r, int timeout_ms)
{
	double until = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
	for (;;) {
		size_t left = 0;
		for (size_t i = 0; i < r->n; i++) {
			struct cave_ring_member *m = &r->m[i];
			pid_t w;
			if (m->pid <= 0 || m->reaped)
				continue;
			w = waitpid(m->pid, &m->status, timeout_ms < 0 ? 0 : WNOHANG);
			if (w == m->pid || (w < 0 && errno == ECHILD))
				m->reaped = true;
			else
				left++;
		}
		if (!left || timeout_ms == 0 || (timeout_ms > 0 && now_ms() >= until))
			return left;
		if (timeout_ms > 0) {
			struct timespec ts = { 0, 5 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
}

const struct cave_ring_member *cave_ring_failed(const struct cave_ring *r)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct cave_ring_member *m = &r->m[i];
		if (m->reaped && (!WIFEXITED(m->status) || WEXITSTATUS(m->status) != 0))
			return m;
	}
	return NULL;
}

const char *cave_ring_name(const struct cave_ring_member *m)
{
	const char *s;
	if (m->shell)
		return m->argv[0];
	s = strrchr(m->argv[0], '/');
	return s ? s + 1 : m->argv[0];
}

void cave_ring_free(struct cave_ring *r)
{
	close_fd(&r->to_ring);
	close_fd(&r->from_ring);
	for (size_t i = 0; i < r->n; i++)
		for (size_t j = 0; r->m[i].argv[j]; j++)
			free(r->m[i].argv[j]);
	r->n = 0;
}

/* sandbox_spawn.c: starts one tool contained. The parent clones a
 * supervisor into fresh user, mount, PID, IPC, UTS, network and cgroup
 * namespaces (and, for network: true, starts slirp4netns against them,
 * which the supervisor waits for); the supervisor (PID 1 there) mounts a
 * private /proc and tmpfs, drops every capability, sets no_new_privs,
 * enforces Landlock and the seccomp policy, forks the tool into its own
 * session with rlimits and the allow-listed environment, answers seccomp
 * notifications, and reports back. When the supervisor dies the kernel kills everything left in the
 * PID namespace. Nothing here inspects what a tool does: the kernel
 * refuses, and any step the kernel cannot do fails the spawn (fail closed). */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/securebits.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox.h"

#define NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | \
		  CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWCGROUP)
/* How long the supervisor waits for slirp4netns to bring tap0 up. */
#define NET_READY_MS 10000
/* slirp4netns processes killed but not reaped yet (see cave_sbx_reap). */
#define MAX_REAP 256

void cave_sbx_limits_default(struct cave_sbx_limits *l)
{
	l->cpu_sec = 60;
	l->mem_mb = 2048;
	l->fsize_mb = 256;
	l->nofile = 256;
	l->nproc = 128;
	l->tmp_mb = 64;
}

/* ---- the supervisor, inside the namespaces ------------------------------ */

struct sup {
	const struct cave_sbx_spec *s;
	int sync_rd, report_wr, out_wr, in_fd;
	int ready_rd;           /* slirp4netns's --ready-fd, -1 without network */
	int exit_wr;            /* held open: slirp4netns's --exit-fd ends with us */
	char **envp;
	const char *scratch;
	char home[300], tmp[300];
	struct cave_sbx_report r;
};

static _Noreturn void sup_fail(struct sup *u, const char *what)
{
	u->r.err = errno;
	snprintf(u->r.what, sizeof u->r.what, "%s", what);
	(void)!write(u->report_wr, &u->r, sizeof u->r);
	_exit(0);
}

static int drop_caps(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	for (int c = 0; c <= 63; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL)
			return -1;
	if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
		  SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
		  SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
		  SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED, 0, 0, 0) != 0)
		return -1;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
		return -1;
	memset(d, 0, sizeof d);
	return (int)syscall(SYS_capset, &h, d);
}

static int set_limit(int res, long v, long extra)
{
	struct rlimit rl;

	rl.rlim_cur = (rlim_t)v;
	rl.rlim_max = (rlim_t)(v + extra);
	return setrlimit(res, &rl);
}

/* The tool's own /etc/resolv.conf names slirp4netns's DNS forwarder: the
 * host's may name a resolver on its loopback, out of the tool's reach. The
 * file is unlinked once bound, so only the read-only view is left. */
static void bind_resolv_conf(struct sup *u)
{
	static const char text[] = "nameserver 10.0.2.3\n";
	char path[320];
	int fd;

	snprintf(path, sizeof path, "%s/resolv.conf", u->scratch);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0 || write(fd, text, sizeof text - 1) != (ssize_t)(sizeof text - 1))
		sup_fail(u, "network: write resolv.conf");
	close(fd);
	if (mount(path, "/etc/resolv.conf", NULL, MS_BIND, NULL) != 0 && errno != ENOENT)
		sup_fail(u, "network: bind /etc/resolv.conf");
	unlink(path);
}

static int mount_private(struct sup *u)
{
	char opts[96];

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		sup_fail(u, "mount namespace: make / private");
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		sup_fail(u, "mount namespace: mount /proc of the PID namespace");
	snprintf(opts, sizeof opts, "size=%ldm,nr_inodes=16384,mode=0700",
		 u->s->lim.tmp_mb);
	if (mount("tmpfs", u->scratch, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
		sup_fail(u, "mount namespace: mount the private tmpfs");
	if (mkdir(u->home, 0700) != 0 || mkdir(u->tmp, 0700) != 0)
		sup_fail(u, "mount namespace: make HOME and TMPDIR");
	if (u->s->network)
		bind_resolv_conf(u);
	return 0;
}

static void contain(struct sup *u)
{
	const struct cave_sbx_spec *s = u->s;
	const char *rd[4] = { NULL, NULL, NULL, NULL }, *wr[3] = { NULL, NULL, NULL };
	const char *what = NULL;
	size_t nr = 0, nw = 0;

	if (sethostname("cave-sandbox", 12) != 0)
		sup_fail(u, "uts namespace: set the host name");
	mount_private(u);
	if (drop_caps() != 0)
		sup_fail(u, "capabilities: drop all");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		sup_fail(u, "prctl: not dumpable");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		sup_fail(u, "prctl: no_new_privs");
	rd[nr++] = s->command;
	if (s->write)
		wr[nw++] = s->workspace;
	else
		rd[nr++] = s->workspace;
	if (s->network)
		rd[nr++] = "/etc/resolv.conf"; /* the bound file, wherever it links */
	wr[nw++] = u->scratch;
	if (s->landlock_abi < 1) {
		errno = ENOSYS;
		sup_fail(u, "landlock: not offered by the kernel");
	}
	if (cave_landlock_enforce(s->landlock_abi, s->view, rd, wr, s->network, &what) != 0)
		sup_fail(u, what ? what : "landlock");
}

/* Loads the compiled policy; returns the notification fd or -1 (none). */
static int load_seccomp(struct sup *u)
{
	struct sock_fprog prog;
	const struct cave_policy *p = u->s->policy;
	long fd;

	if (!p || !p->bpf) {
		errno = EINVAL;
		sup_fail(u, "seccomp: no compiled policy");
	}
	prog.len = p->bpf_len;
	prog.filter = p->bpf;
	fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
		     p->notify ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0, &prog);
	if (fd < 0)
		sup_fail(u, "seccomp: load the policy filter");
	return p->notify ? (int)fd : -1;
}

/* Waits for slirp4netns to report tap0 configured: the tool never starts
 * before its network is there. Nothing is contained yet (fails report). */
static void wait_network(struct sup *u)
{
	struct pollfd pf = { u->ready_rd, POLLIN, 0 };
	char c = 0;
	int rc;

	if (u->ready_rd < 0)
		return;
	while ((rc = poll(&pf, 1, NET_READY_MS)) < 0 && errno == EINTR)
		;
	if (rc == 0)
		errno = ETIMEDOUT;
	else if (rc > 0 && (read(u->ready_rd, &c, 1) != 1 || c != '1'))
		errno = ENETDOWN;
	if (c != '1')
		sup_fail(u, "network: slirp4netns did not bring the interface up");
	close(u->ready_rd);
	u->ready_rd = -1;
}

static _Noreturn void run_tool(struct sup *u, int err_wr)
{
	const struct cave_sbx_spec *s = u->s;
	char *argv[2] = { (char *)s->command, NULL };
	sigset_t none;
	int e;

	sigemptyset(&none);
	for (int sig = 1; sig < 32; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (s->mode == CAVE_SBX_REQUIRED) {
		if (setsid() < 0 ||
		    set_limit(RLIMIT_CPU, s->lim.cpu_sec, 1) != 0 ||
		    set_limit(RLIMIT_AS, s->lim.mem_mb << 20, 0) != 0 ||
		    set_limit(RLIMIT_FSIZE, s->lim.fsize_mb << 20, 0) != 0 ||
		    set_limit(RLIMIT_NOFILE, s->lim.nofile, 0) != 0 ||
		    set_limit(RLIMIT_NPROC, s->lim.nproc, 0) != 0 ||
		    set_limit(RLIMIT_CORE, 0, 0) != 0)
			goto fail;
	}
	if (dup2(u->in_fd, 0) < 0 || dup2(u->out_wr, 1) < 0 || dup2(u->out_wr, 2) < 0 ||
	    dup2(err_wr, 3) < 0 || fcntl(3, F_SETFD, FD_CLOEXEC) != 0)
		goto fail;
	if (syscall(SYS_close_range, 4, ~0U, 0) != 0)
		for (int fd = 4; fd < 1024; fd++)
			close(fd);
	if (chdir(s->workspace) != 0)
		goto fail;
	execve(s->command, argv, u->envp);
fail:
	e = errno;
	(void)!write(3, &e, sizeof e);
	_exit(127);
}

static void note_denial(struct sup *u, int rule, int nr, int killed)
{
	struct cave_sbx_report *r = &u->r;
	int i;

	for (i = 0; i < r->ndenials; i++)
		if (r->denials[i].rule == rule && r->denials[i].nr == nr)
			break;
	if (i == r->ndenials) {
		if (i == CAVE_SBX_MAX_DENIALS)
			return;
		r->ndenials++;
		r->denials[i].rule = rule;
		r->denials[i].nr = nr;
	}
	r->denials[i].count++;
	r->denials[i].killed |= killed;
}

static void answer(struct sup *u, int nfd, struct seccomp_notif *req,
		   struct seccomp_notif_resp *resp)
{
	const struct cave_policy *p = u->s->policy;
	int rule, kill_it;

	memset(req, 0, sizeof *req);
	if (seccomp_notify_receive(nfd, req) != 0)
		return;
	rule = cave_policy_match(p, req->data.nr, (const uint64_t *)req->data.args);
	kill_it = rule < 0 || p->rules[rule].action == CAVE_POL_KILL;
	note_denial(u, rule, req->data.nr, kill_it);
	if (kill_it)
		kill(req->pid, SIGKILL);
	memset(resp, 0, sizeof *resp);
	resp->id = req->id;
	resp->error = -(rule >= 0 && p->rules[rule].err ? p->rules[rule].err : EPERM);
	(void)seccomp_notify_respond(nfd, resp);
}

static _Noreturn void supervise(struct sup *u)
{
	const struct cave_sbx_spec *s = u->s;
	struct seccomp_notif *req = NULL;
	struct seccomp_notif_resp *resp = NULL;
	int sfd, nfd = -1, err_pipe[2], e, st;
	sigset_t chld;
	pid_t tool;
	ssize_t got;
	char c;

	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	prctl(PR_SET_NAME, "cave-sbx-init", 0, 0, 0);
	if (read(u->sync_rd, &c, 1) != 1)
		_exit(0); /* the parent gave up */
	close(u->sync_rd);
	u->r.magic = CAVE_SBX_REPORT_MAGIC;
	if (setsid() < 0)
		sup_fail(u, "setsid");
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	if ((sfd = signalfd(-1, &chld, SFD_CLOEXEC)) < 0)
		sup_fail(u, "signalfd");
	if (s->mode == CAVE_SBX_REQUIRED) {
		if (s->policy && s->policy->notify &&
		    seccomp_notify_alloc(&req, &resp) != 0)
			sup_fail(u, "seccomp: allocate notifications");
		/* before contain() makes us undumpable: slirp4netns opens our
		 * /proc/PID/ns files until it is ready */
		wait_network(u);
		contain(u);
		nfd = load_seccomp(u);
	}
	if (pipe2(err_pipe, O_CLOEXEC) != 0)
		sup_fail(u, "pipe");
	tool = fork();
	if (tool < 0)
		sup_fail(u, "fork the tool");
	if (tool == 0) {
		close(err_pipe[0]);
		run_tool(u, err_pipe[1]);
	}
	close(err_pipe[1]);
	close(u->out_wr);
	close(u->in_fd);
	got = read(err_pipe[0], &e, sizeof e);
	close(err_pipe[0]);
	if (got == (ssize_t)sizeof e) {
		errno = e;
		waitpid(tool, &st, 0);
		sup_fail(u, "execute the tool");
	}
	u->r.started = 1;
	for (;;) {
		struct pollfd pf[2] = { { sfd, POLLIN, 0 }, { nfd, POLLIN, 0 } };
		struct signalfd_siginfo si;
		pid_t w;

		if (poll(pf, nfd >= 0 ? 2 : 1, -1) < 0)
			continue;
		if (nfd >= 0 && (pf[1].revents & POLLIN))
			answer(u, nfd, req, resp);
		if (!(pf[0].revents & POLLIN))
			continue;
		(void)!read(sfd, &si, sizeof si);
		while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
			if (w == tool) {
				u->r.status = st;
				(void)!write(u->report_wr, &u->r, sizeof u->r);
				if (s->mode == CAVE_SBX_HOST)
					kill(0, SIGKILL); /* the tool's group, and us */
				_exit(0);
			}
		}
	}
}

/* ---- the parent ---------------------------------------------------------- */

static int write_map(pid_t pid, const char *file, const char *text)
{
	char path[64];
	int fd, ret = -1;
	size_t n = strlen(text);

	snprintf(path, sizeof path, "/proc/%ld/%s", (long)pid, file);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
		return -1;
	if (write(fd, text, n) == (ssize_t)n)
		ret = 0;
	close(fd);
	return ret;
}

static int input_fd(const char *p, size_t n)
{
	char path[64];
	int fd = memfd_create("cave-tool-input", MFD_CLOEXEC), ro;
	size_t off = 0;

	if (fd < 0)
		return -1;
	while (off < n) {
		ssize_t w = write(fd, p + off, n - off);

		if (w <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)w;
	}
	/* the tool gets a read-only descriptor of the same bytes */
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	close(fd);
	return ro;
}

int cave_sbx_spawn(const struct cave_sbx_spec *s, struct cave_sbx_proc *p,
		   cave_err *e)
{
	struct sup u;
	int out[2] = { -1, -1 }, rep[2] = { -1, -1 }, sync[2] = { -1, -1 };
	int ready[2] = { -1, -1 }, netexit[2] = { -1, -1 };
	int ret = -1;
	bool req = s->mode == CAVE_SBX_REQUIRED, net = req && s->network;
	char map[64];
	long pid;

	memset(p, 0, sizeof *p);
	memset(&u, 0, sizeof u);
	p->pid = -1;
	p->out_fd = p->report_fd = p->net_log = -1;
	p->host = !req;
	u.s = s;
	u.in_fd = u.ready_rd = u.exit_wr = -1;
	if (req) {
		if ((size_t)snprintf(p->scratch, sizeof p->scratch,
				     "%s/cave-sandbox.XXXXXX", s->scratch_parent) >=
		    sizeof p->scratch || !mkdtemp(p->scratch)) {
			p->scratch[0] = '\0';
			cave_errf(e, "cave_sandbox_unavailable",
				  "cannot make a scratch directory in '%s': %s",
				  s->scratch_parent, strerror(errno));
			goto out;
		}
		u.scratch = p->scratch;
		snprintf(u.home, sizeof u.home, "%s/home", p->scratch);
		snprintf(u.tmp, sizeof u.tmp, "%s/tmp", p->scratch);
		if (cave_cgroup_make(s->lim.nproc, p->cgroup, sizeof p->cgroup) != 0) {
			p->cgroup[0] = '\0';
			if (geteuid() == 0) {
				cave_errf(e, "cave_sandbox_unavailable",
					  "no writable pids cgroup: RLIMIT_NPROC does not bind "
					  "uid 0, so a fork bomb could not be bounded");
				goto out;
			}
		}
	}
	cave_env_build(&u.envp, req ? u.home : NULL, req ? u.tmp : NULL);
	if (pipe2(out, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0 ||
	    pipe2(sync, O_CLOEXEC) != 0 ||
	    (u.in_fd = input_fd(s->input, s->input_len)) < 0) {
		cave_errf(e, "cave_sandbox_unavailable", "cannot make pipes: %s",
			  strerror(errno));
		goto out;
	}
	if (net && (!s->slirp || pipe2(ready, O_CLOEXEC) != 0 ||
		    pipe2(netexit, O_CLOEXEC) != 0)) {
		cave_errf(e, "cave_sandbox_unavailable", "network: %s",
			  s->slirp ? strerror(errno) : "no slirp4netns to run");
		goto out;
	}
	u.ready_rd = ready[0];
	u.exit_wr = netexit[1];
	u.sync_rd = sync[0];
	u.report_wr = rep[1];
	u.out_wr = out[1];
	fflush(NULL);
	pid = syscall(SYS_clone, SIGCHLD | (req ? NS_FLAGS : 0), NULL, NULL, NULL, 0);
	if (pid < 0) {
		cave_errf(e, "cave_sandbox_unavailable",
			  "cannot create user, mount, PID, IPC, UTS, network and "
			  "cgroup namespaces: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		close(sync[1]);
		close(out[0]);
		close(rep[0]);
		if (net) {
			/* slirp4netns's ends: when they close, it sees it */
			close(ready[1]);
			close(netexit[0]);
		}
		supervise(&u);
	}
	p->pid = (pid_t)pid;
	if (req) {
		snprintf(map, sizeof map, "%u %u 1\n", (unsigned)geteuid(),
			 (unsigned)geteuid());
		if (write_map(p->pid, "uid_map", map) != 0 ||
		    write_map(p->pid, "setgroups", "deny") != 0 ||
		    (snprintf(map, sizeof map, "%u %u 1\n", (unsigned)getegid(),
			      (unsigned)getegid()),
		     write_map(p->pid, "gid_map", map) != 0)) {
			cave_errf(e, "cave_sandbox_unavailable",
				  "user namespace: cannot map the user: %s",
				  strerror(errno));
			goto out;
		}
		if (p->cgroup[0] && cave_cgroup_join(p->cgroup, p->pid) != 0) {
			cave_errf(e, "cave_sandbox_unavailable",
				  "cannot join the pids cgroup: %s", strerror(errno));
			goto out;
		}
	}
	if (net) {
		p->net_pid = cave_net_start(s->slirp, p->pid, s->host_loopback, netexit[0],
					    ready[1], &p->net_log, e);
		if (p->net_pid < 0) {
			p->net_pid = 0;
			goto out;
		}
	}
	if (write(sync[1], "g", 1) != 1) {
		cave_errf(e, "cave_sandbox_unavailable", "the supervisor went away");
		goto out;
	}
	p->out_fd = out[0];
	p->report_fd = rep[0];
	out[0] = rep[0] = -1;
	ret = 0;
out:
	if (ret != 0 && p->pid > 0) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
		p->pid = -1;
	}
	if (ret != 0 && p->net_pid > 0) {
		kill(p->net_pid, SIGKILL);
		waitpid(p->net_pid, NULL, 0);
		p->net_pid = 0;
	}
	if (ret != 0 && p->net_log >= 0) {
		close(p->net_log);
		p->net_log = -1;
	}
	if (ret != 0 && p->scratch[0])
		rmdir(p->scratch);
	if (ret != 0 && p->cgroup[0])
		cave_cgroup_remove(p->cgroup);
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (rep[i] >= 0)
			close(rep[i]);
		if (sync[i] >= 0)
			close(sync[i]);
		if (ready[i] >= 0)
			close(ready[i]);
		if (netexit[i] >= 0)
			close(netexit[i]);
	}
	if (u.in_fd >= 0)
		close(u.in_fd);
	cave_env_free(u.envp);
	return ret;
}

void cave_sbx_kill(struct cave_sbx_proc *p)
{
	if (p->pid <= 0)
		return;
	/* PID 1 of the namespace: the kernel takes everything else with it.
	 * In host mode the supervisor leads the tool's process group. */
	if (p->host)
		kill(-p->pid, SIGKILL);
	kill(p->pid, SIGKILL);
}

/* A killed slirp4netns takes a while to go (tearing tap0 down waits for
 * an RCU grace period, some 25 ms): it is reaped later, so that the
 * tool's result does not wait for it. */
static pid_t reap_later[MAX_REAP];

void cave_sbx_reap(bool wait)
{
	for (int i = 0; i < MAX_REAP; i++) {
		pid_t w;

		if (reap_later[i] <= 0)
			continue;
		while ((w = waitpid(reap_later[i], NULL, wait ? 0 : WNOHANG)) < 0 &&
		       errno == EINTR)
			;
		if (w != 0)
			reap_later[i] = 0;
	}
}

static void reap_net(pid_t pid)
{
	kill(pid, SIGKILL); /* its --exit-fd closed with the supervisor already */
	if (waitpid(pid, NULL, WNOHANG) != 0)
		return;
	for (int i = 0; i < MAX_REAP; i++)
		if (reap_later[i] <= 0) {
			reap_later[i] = pid;
			return;
		}
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

void cave_sbx_finish(struct cave_sbx_proc *p, int *status)
{
	int st = 0;

	if (p->pid > 0) {
		while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
			;
		p->pid = -1;
	}
	if (status)
		*status = st;
	if (p->net_pid > 0)
		reap_net(p->net_pid);
	p->net_pid = 0;
	if (p->net_log >= 0)
		close(p->net_log);
	p->net_log = -1;
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->report_fd >= 0)
		close(p->report_fd);
	p->out_fd = p->report_fd = -1;
	if (p->scratch[0])
		rmdir(p->scratch);
	p->scratch[0] = '\0';
	if (p->cgroup[0])
		cave_cgroup_remove(p->cgroup);
	p->cgroup[0] = '\0';
}

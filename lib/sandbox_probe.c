/* sandbox_probe.c: what the running kernel offers to contain a tool, for
 * cave doctor and for failing closed before a tool is started. It only
 * asks; it never weakens what required mode demands. */
#include <errno.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox.h"

static bool try_namespaces(void)
{
	int st;
	pid_t pid = fork();

	if (pid < 0)
		return false;
	if (pid == 0)
		_exit(unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
			      CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWCGROUP) == 0 ? 0 : 1);
	if (waitpid(pid, &st, 0) != pid)
		return false;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void add_missing(struct cave_kernel *k, const char *what)
{
	size_t n = strlen(k->missing);

	snprintf(k->missing + n, sizeof k->missing - n, "%s%s", n ? ", " : "", what);
}

void cave_kernel_probe(struct cave_kernel *k)
{
	struct utsname u;
	unsigned int act = SECCOMP_RET_USER_NOTIF;
	long fd;

	memset(k, 0, sizeof *k);
	if (uname(&u) == 0)
		snprintf(k->release, sizeof k->release, "%s", u.release);
	k->landlock_abi = cave_landlock_abi();
	k->userns = try_namespaces();
	k->seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 &&
		     syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0,
			     &(unsigned int){SECCOMP_RET_KILL_PROCESS}) == 0;
	k->seccomp_notify = k->seccomp &&
			    syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &act) == 0;
	fd = syscall(SYS_pidfd_open, getpid(), 0);
	k->pidfd = fd >= 0;
	if (fd >= 0)
		close((int)fd);
	if (!k->userns)
		add_missing(k, "user, mount, PID, IPC, UTS and network namespaces");
	if (k->landlock_abi < 1)
		add_missing(k, "Landlock");
	else if (k->landlock_abi < 3) /* before 3, truncate(2) is not governed */
		add_missing(k, "Landlock ABI 3 (Linux 6.2: truncate control)");
	if (!k->seccomp)
		add_missing(k, "seccomp filters");
	if (geteuid() == 0) {
		char path[1280];

		if (cave_cgroup_make(16, path, sizeof path) == 0)
			cave_cgroup_remove(path);
		else
			add_missing(k, "a writable pids cgroup (needed as uid 0)");
	}
}

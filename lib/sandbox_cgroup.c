/* sandbox_cgroup.c: a pids cgroup per tool, so a fork bomb meets a kernel
 * limit even when RLIMIT_NPROC does not bind (the kernel exempts uid 0
 * from it). Works with the cgroup v1 pids hierarchy or cgroup v2. It only
 * makes, joins and removes its own child groups; it never touches others. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sandbox.h"

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = -1;
	size_t n = strlen(s);

	if (fd < 0)
		return -1;
	if (write(fd, s, n) == (ssize_t)n)
		ret = 0;
	close(fd);
	return ret;
}

/* The directory of this process's pids cgroup: v1 "N:pids:/p" under the
 * pids mount, else v2 "0::/p" under the cgroup2 mount. */
static int own_group(char *out, size_t n, int *v2)
{
	char line[1024], mnt1[512] = "", mnt2[512] = "", rel1[512] = "", rel2[512] = "";
	FILE *f;
	int ret = -1;

	if (!(f = fopen("/proc/self/mountinfo", "re")))
		return -1;
	while (fgets(line, sizeof line, f)) {
		char *sep = strstr(line, " - "), *fields[6], *p = line;
		int i;

		if (!sep)
			continue;
		for (i = 0; i < 5 && p; i++) { /* id parent dev root mountpoint */
			fields[i] = p;
			p = strchr(p, ' ');
			if (p)
				*p++ = '\0';
		}
		if (i < 5)
			continue;
		if (strncmp(sep + 3, "cgroup2 ", 8) == 0 && !mnt2[0])
			snprintf(mnt2, sizeof mnt2, "%s", fields[4]);
		else if (strncmp(sep + 3, "cgroup ", 7) == 0 &&
			 (strstr(sep, ",pids") || strstr(sep, " pids")) && !mnt1[0])
			snprintf(mnt1, sizeof mnt1, "%s", fields[4]);
	}
	fclose(f);
	if (!(f = fopen("/proc/self/cgroup", "re")))
		return -1;
	while (fgets(line, sizeof line, f)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;

		if (!b)
			continue;
		b[strcspn(b, "\n")] = '\0';
		if (strncmp(a, ":pids:", 6) == 0)
			snprintf(rel1, sizeof rel1, "%s", b + 1);
		else if (strncmp(line, "0::", 3) == 0)
			snprintf(rel2, sizeof rel2, "%s", b + 1);
	}
	fclose(f);
	if (mnt1[0] && rel1[0]) {
		*v2 = 0;
		ret = (size_t)snprintf(out, n, "%s%s", mnt1,
				       strcmp(rel1, "/") ? rel1 : "") < n ? 0 : -1;
	} else if (mnt2[0] && rel2[0]) {
		*v2 = 1;
		ret = (size_t)snprintf(out, n, "%s%s", mnt2,
				       strcmp(rel2, "/") ? rel2 : "") < n ? 0 : -1;
	}
	return ret;
}

int cave_cgroup_make(long pids_max, char *path, size_t n)
{
	static unsigned seq;
	char base[1024], file[1200], val[32];
	int v2 = 0;

	if (own_group(base, sizeof base, &v2) != 0)
		return -1;
	if (v2) {
		snprintf(file, sizeof file, "%s/cgroup.subtree_control", base);
		(void)write_file(file, "+pids");
	}
	if ((size_t)snprintf(path, n, "%s/cave-sandbox.%ld.%u", base,
			     (long)getpid(), seq++) >= n)
		return -1;
	/* EEXIST: left by a killed cave-sandbox that had our PID (no live
	 * process has it); rmdir only takes it when it has no members */
	if (mkdir(path, 0700) != 0 &&
	    (errno != EEXIST || rmdir(path) != 0 || mkdir(path, 0700) != 0))
		return -1;
	snprintf(file, sizeof file, "%s/pids.max", path);
	snprintf(val, sizeof val, "%ld", pids_max);
	if (write_file(file, val) != 0) {
		rmdir(path);
		return -1;
	}
	return 0;
}

int cave_cgroup_join(const char *path, pid_t pid)
{
	char file[1200], val[32];

	snprintf(file, sizeof file, "%s/cgroup.procs", path);
	snprintf(val, sizeof val, "%ld", (long)pid);
	return write_file(file, val);
}

void cave_cgroup_remove(const char *path)
{
	/* the last members may still be on their way out */
	for (int i = 0; i < 50; i++) {
		struct timespec ts = {0, 1000000};

		if (rmdir(path) == 0 || errno != EBUSY)
			return;
		nanosleep(&ts, NULL);
	}
}

long cave_cgroup_pids_refused(const char *path)
{
	char file[1200], buf[256], *p, *end;
	long v = 0;
	ssize_t n;
	int fd;

	snprintf(file, sizeof file, "%s/pids.events", path);
	if ((fd = open(file, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if ((p = strstr(buf, "max ")) != NULL) {
		errno = 0;
		v = strtol(p + 4, &end, 10);
		if (errno || end == p + 4)
			v = 0;
	}
	return v;
}

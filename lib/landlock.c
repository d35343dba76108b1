/* landlock.c: the Landlock ruleset of a contained tool. It owns the raw
 * system calls, the access rights each ABI version knows, and the rules
 * built from a filesystem view. It must never grant a right the kernel
 * would not handle (then the right would be silently unrestricted): every
 * right it grants is one it also asks the kernel to handle. */
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox.h"

/* Rights newer than the oldest headers this builds with. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#define LL_NET_BIND_TCP (1ULL << 0)
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)

/* struct landlock_ruleset_attr as of ABI 6; the kernel is told how much of
 * it the running ABI knows. */
struct ll_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

#define FS_READ (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | \
		 LANDLOCK_ACCESS_FS_READ_DIR)
#define FS_WRITE_V1 (LANDLOCK_ACCESS_FS_WRITE_FILE | \
		     LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE | \
		     LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG | \
		     LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | \
		     LANDLOCK_ACCESS_FS_MAKE_SYM)
#define FS_ALL_V1 (FS_READ | FS_WRITE_V1 | LANDLOCK_ACCESS_FS_MAKE_CHAR | \
		   LANDLOCK_ACCESS_FS_MAKE_BLOCK)
/* Rights that make sense on a file (not a directory) rule. */
#define FS_FILE_RIGHTS (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | \
			LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | \
			LANDLOCK_ACCESS_FS_IOCTL_DEV)

int cave_landlock_abi(void)
{
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0,
			 LANDLOCK_CREATE_RULESET_VERSION);

	return v < 0 ? 0 : (int)v;
}

static uint64_t handled_fs(int abi)
{
	uint64_t h = FS_ALL_V1;

	if (abi >= 2)
		h |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		h |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		h |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return h;
}

static uint64_t write_rights(int abi)
{
	uint64_t w = FS_WRITE_V1;

	if (abi >= 2)
		w |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		w |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		w |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return w;
}

/* Adds one path-beneath rule; a path that does not exist is skipped. */
static int rule(int rfd, const char *path, uint64_t access)
{
	struct landlock_path_beneath_attr pb;
	struct stat st;
	int fd, rc;

	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
	if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
		access &= FS_FILE_RIGHTS;
	pb.allowed_access = access;
	pb.parent_fd = fd;
	rc = (int)syscall(SYS_landlock_add_rule, rfd, LANDLOCK_RULE_PATH_BENEATH,
			  &pb, 0);
	close(fd);
	return rc;
}

int cave_landlock_enforce(int abi, const struct cave_fs_view *view,
			  const char *const *extra_read,
			  const char *const *extra_write, bool tcp_connect,
			  const char **what)
{
	struct ll_attr attr;
	size_t attr_size = sizeof attr.handled_access_fs;
	uint64_t w = write_rights(abi);
	int rfd = -1, ret = -1;

	memset(&attr, 0, sizeof attr);
	attr.handled_access_fs = handled_fs(abi);
	if (abi >= 4) {
		/* no rule grants a port: no TCP bind at all, and no TCP connect
		 * unless the tool has a network of its own (network: true) */
		attr.handled_access_net = LL_NET_BIND_TCP |
					  (tcp_connect ? 0 : LL_NET_CONNECT_TCP);
		attr_size = offsetof(struct ll_attr, scoped);
	}
	if (abi >= 6) {
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
		attr_size = sizeof attr;
	}
	*what = "landlock: create ruleset";
	rfd = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
	if (rfd < 0)
		goto out;
	*what = "landlock: add a rule of the filesystem view";
	for (size_t i = 0; view && i < view->n; i++)
		if (rule(rfd, view->e[i].path,
			 FS_READ | (view->e[i].write ? w : 0)) != 0)
			goto out;
	*what = "landlock: add the workspace";
	for (size_t i = 0; extra_read && extra_read[i]; i++)
		if (rule(rfd, extra_read[i], FS_READ) != 0)
			goto out;
	for (size_t i = 0; extra_write && extra_write[i]; i++)
		if (rule(rfd, extra_write[i], FS_READ | w) != 0)
			goto out;
	*what = "landlock: restrict self";
	if (syscall(SYS_landlock_restrict_self, rfd, 0) != 0)
		goto out;
	*what = NULL;
	ret = 0;
out:
	if (rfd >= 0)
		close(rfd);
	return ret;
}

/* paths.c: locating the project's data relative to the running program. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "paths.h"

int cave_data_path(const char *rel, char *out, size_t n)
{
	static const char *const prefixes[] = { "..", "../share/cave" };
	char dir[PATH_MAX];
	ssize_t r = readlink("/proc/self/exe", dir, sizeof dir - 1);
	char *slash;
	if (r <= 0)
		return -1;
	dir[r] = '\0';
	if (!(slash = strrchr(dir, '/')))
		return -1;
	*slash = '\0';
	for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
		int m = snprintf(out, n, "%s/%s/%s", dir, prefixes[i], rel);
		if (m > 0 && (size_t)m < n && access(out, R_OK) == 0)
			return 0;
	}
	return -1;
}

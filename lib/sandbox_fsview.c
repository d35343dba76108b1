/* sandbox_fsview.c: the filesystem a contained tool may see, from
 * sandbox/fs.policy ("read PATH", "rw PATH", "hide PATH") to a flat list of
 * trees to grant. A hidden path is carved out by granting its siblings one
 * by one instead of the tree above it. It never grants anything itself:
 * lib/landlock.c turns the list into kernel rules. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "sandbox.h"

#define FS_POLICY_MAX ((size_t)256 << 10)
#define FS_MAX_HIDE 64

struct hides {
	size_t n;
	char *p[FS_MAX_HIDE];
};

/* True when b is a strict descendant of a ("/etc" and "/etc/shadow"). */
static int beneath(const char *a, const char *b)
{
	size_t n = strlen(a);

	if (strcmp(a, "/") == 0)
		return b[0] == '/' && b[1] != '\0';
	return strncmp(a, b, n) == 0 && b[n] == '/';
}

static int add(struct cave_fs_view *v, const char *path, bool write, cave_err *e)
{
	if (v->n == CAVE_FS_MAX)
		return cave_errf(e, "cave_sandbox_bad_policy",
				 "fs.policy: more than %d paths after expansion",
				 CAVE_FS_MAX);
	v->e[v->n].path = cave_xstrdup(path);
	v->e[v->n].write = write;
	v->n++;
	return 0;
}

/* Grants path, or its entries one by one when a hidden path lies below. */
static int grant(struct cave_fs_view *v, const struct hides *h,
		 const char *path, bool write, int depth, cave_err *e)
{
	struct dirent *d;
	DIR *dir = NULL;
	size_t i;
	int ret = -1;

	for (i = 0; i < h->n; i++)
		if (strcmp(h->p[i], path) == 0)
			return 0;
	for (i = 0; i < h->n; i++)
		if (beneath(path, h->p[i]))
			break;
	if (i == h->n)
		return add(v, path, write, e);
	if (depth > 16 || !(dir = opendir(path))) {
		ret = 0; /* cannot be listed: grant nothing beneath it */
		goto out;
	}
	while ((d = readdir(dir))) {
		char sub[4096];

		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		if ((size_t)snprintf(sub, sizeof sub, "%s/%s",
				     strcmp(path, "/") ? path : "", d->d_name) >= sizeof sub)
			continue;
		if (grant(v, h, sub, write, depth + 1, e) != 0)
			goto out;
	}
	ret = 0;
out:
	if (dir)
		closedir(dir);
	return ret;
}

int cave_fs_view_parse(struct cave_fs_view *v, const char *name,
		       const char *text, size_t len, cave_err *e)
{
	struct hides h = {0};
	struct { char *path; bool write; } want[256];
	size_t nwant = 0, i = 0;
	unsigned lineno = 0;
	int ret = -1;

	memset(v, 0, sizeof *v);
	while (i < len) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
		char line[4096], *p, *arg;

		lineno++;
		i += n + 1;
		if (n >= sizeof line) {
			cave_errf(e, "cave_sandbox_bad_policy", "%s:%u: line too long",
				  name, lineno);
			goto out;
		}
		memcpy(line, text + i - n - 1, n);
		line[n] = '\0';
		p = line + strspn(line, " \t");
		while (n && strchr(" \t\r", line[n - 1]))
			line[--n] = '\0';
		if (!*p || *p == '#')
			continue;
		arg = p + strcspn(p, " \t");
		if (*arg)
			*arg++ = '\0';
		arg += strspn(arg, " \t");
		if (arg[0] != '/' || strstr(arg, "/../") || strchr(arg, ' ') ||
		    (n > 3 && strcmp(line + n - 3, "/..") == 0)) {
			cave_errf(e, "cave_sandbox_bad_policy",
				  "%s:%u: expected an absolute path", name, lineno);
			goto out;
		}
		if (strcmp(p, "hide") == 0) {
			if (h.n == FS_MAX_HIDE)
				goto toomany;
			h.p[h.n++] = cave_xstrdup(arg);
		} else if (strcmp(p, "read") == 0 || strcmp(p, "rw") == 0) {
			if (nwant == sizeof want / sizeof *want)
				goto toomany;
			want[nwant].path = cave_xstrdup(arg);
			want[nwant].write = p[0] == 'r' && p[1] == 'w';
			nwant++;
		} else {
			cave_errf(e, "cave_sandbox_bad_policy",
				  "%s:%u: unknown verb '%s' (read, rw, hide)", name,
				  lineno, p);
			goto out;
		}
	}
	for (i = 0; i < nwant; i++) {
		struct stat st;

		if (stat(want[i].path, &st) != 0)
			continue; /* not on this machine */
		if (grant(v, &h, want[i].path, want[i].write, 0, e) != 0)
			goto out;
	}
	ret = 0;
	goto out;
toomany:
	cave_errf(e, "cave_sandbox_bad_policy", "%s:%u: too many rules", name, lineno);
out:
	for (i = 0; i < nwant; i++)
		free(want[i].path);
	for (i = 0; i < h.n; i++)
		free(h.p[i]);
	if (ret != 0)
		cave_fs_view_free(v);
	return ret;
}

int cave_fs_view_load(struct cave_fs_view *v, const char *path, cave_err *e)
{
	struct cave_buf text;
	int ret;

	if (cave_policy_read(&text, path, FS_POLICY_MAX, e) < 0)
		return -1;
	ret = cave_fs_view_parse(v, path, text.data ? text.data : "", text.len, e);
	cave_buf_free(&text);
	return ret;
}

void cave_fs_view_free(struct cave_fs_view *v)
{
	for (size_t i = 0; i < v->n; i++)
		free(v->e[i].path);
	v->n = 0;
}

/* sandbox_env.c: the environment a tool gets, a fixed allow-list, and the
 * scrubbing of credentials from this process's own environment block. It
 * must never pass a variable that is not on the list, whatever its name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sandbox.h"

extern char **environ;

#define ENV_MAX 32

static int has_ci(const char *name, size_t n, const char *needle)
{
	size_t m = strlen(needle);

	for (size_t i = 0; i + m <= n; i++)
		if (strncasecmp(name + i, needle, m) == 0)
			return 1;
	return 0;
}

bool cave_env_is_secret(const char *name)
{
	size_t n = strcspn(name, "=");

	if (n >= 5 && strncmp(name, "CAVE_", 5) == 0)
		return true;
	return has_ci(name, n, "API_KEY") || has_ci(name, n, "APIKEY") ||
	       has_ci(name, n, "TOKEN") || has_ci(name, n, "SECRET") ||
	       has_ci(name, n, "PASSWORD") || has_ci(name, n, "PASSWD") ||
	       has_ci(name, n, "CREDENTIAL") || has_ci(name, n, "AUTH") ||
	       has_ci(name, n, "COOKIE") || has_ci(name, n, "SESSION") ||
	       has_ci(name, n, "PRIVATE_KEY") ||
	       (n >= 4 && strncmp(name, "AWS_", 4) == 0) ||
	       (n >= 7 && strncmp(name, "GOOGLE_", 7) == 0) ||
	       (n >= 8 && strncmp(name, "SSH_AUTH", 8) == 0);
}

void cave_env_scrub_self(void)
{
	char names[64][128];
	size_t n = 0;

	for (char **e = environ; e && *e; e++) {
		char *eq = strchr(*e, '=');
		size_t len;

		if (!eq || !cave_env_is_secret(*e))
			continue;
		len = (size_t)(eq - *e);
		if (n < 64 && len < sizeof names[0]) {
			memcpy(names[n], *e, len);
			names[n++][len] = '\0';
		}
		/* the value's bytes, in place: no copy of the block keeps it */
		memset(eq + 1, 'x', strlen(eq + 1));
	}
	for (size_t i = 0; i < n; i++)
		unsetenv(names[i]);
}

static int allowed(const char *kv)
{
	static const char *const names[] = { "LANG=", "TERM=", "TZ=", "LANGUAGE=" };

	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strncmp(kv, names[i], strlen(names[i])) == 0)
			return 1;
	return strncmp(kv, "LC_", 3) == 0 && !cave_env_is_secret(kv);
}

int cave_env_build(char ***envp, const char *home, const char *tmp)
{
	char **v = cave_xcalloc(ENV_MAX + 1, sizeof *v);
	size_t n = 0;
	const char *h = home ? home : getenv("HOME");
	const char *t = tmp ? tmp : getenv("TMPDIR");
	size_t len;

	v[n++] = cave_xstrdup("PATH=/usr/local/bin:/usr/bin:/bin");
	if (h) {
		len = strlen(h) + 6;
		v[n] = cave_xmalloc(len);
		snprintf(v[n++], len, "HOME=%s", h);
	}
	if (t) {
		len = strlen(t) + 8;
		v[n] = cave_xmalloc(len);
		snprintf(v[n++], len, "TMPDIR=%s", t);
	}
	for (char **e = environ; e && *e && n < ENV_MAX; e++)
		if (allowed(*e))
			v[n++] = cave_xstrdup(*e);
	v[n] = NULL;
	*envp = v;
	return 0;
}

void cave_env_free(char **envp)
{
	for (size_t i = 0; envp && envp[i]; i++)
		free(envp[i]);
	free(envp);
}

/* sandbox_path.c: where a tool runs and what it runs, resolved once with
 * realpath so that a symlink or ".." cannot point the grant elsewhere. It
 * only resolves and refuses; Landlock enforces the result. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox.h"

int cave_sbx_resolve(const char *workspace, const char *command,
		     char ws_out[4096], char cmd_out[4096], cave_err *e)
{
	char joined[8192], *r;
	struct stat st;
	size_t n;

	if (!workspace || !*workspace)
		workspace = ".";
	if (!(r = realpath(workspace, NULL)))
		return cave_errf(e, "cave_sandbox_bad_path",
				 "workspace '%s': %s", workspace, strerror(errno));
	n = strlen(r);
	if (n >= 4096 || stat(r, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    strcmp(r, "/") == 0) {
		cave_errf(e, "cave_sandbox_bad_path",
			  "workspace '%s' is not a directory other than /", workspace);
		free(r);
		return -1;
	}
	memcpy(ws_out, r, n + 1);
	free(r);
	if (!command || !*command)
		return cave_errf(e, "cave_sandbox_bad_path", "tool.request has no command");
	if (command[0] == '/')
		snprintf(joined, sizeof joined, "%s", command);
	else if ((size_t)snprintf(joined, sizeof joined, "%s/%s", ws_out, command) >=
		 sizeof joined)
		return cave_errf(e, "cave_sandbox_bad_path", "command path too long");
	if (!(r = realpath(joined, NULL)))
		return cave_errf(e, "cave_sandbox_bad_path", "command '%s': %s",
				 command, strerror(errno));
	n = strlen(r);
	if (command[0] != '/' &&
	    (strncmp(r, ws_out, strlen(ws_out)) != 0 || r[strlen(ws_out)] != '/')) {
		cave_errf(e, "cave_sandbox_bad_path",
			  "command '%s' resolves out of the workspace", command);
		free(r);
		return -1;
	}
	if (n >= 4096 || stat(r, &st) != 0 || !S_ISREG(st.st_mode)) {
		cave_errf(e, "cave_sandbox_bad_path", "command '%s' is not a file",
			  command);
		free(r);
		return -1;
	}
	memcpy(cmd_out, r, n + 1);
	free(r);
	return 0;
}

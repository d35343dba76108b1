/* test_journal.c: the run journal (lib/journal.c): append, read back in
 * order, and the torn last line a crash can leave. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "journal.h"
#include "tap.h"

struct seen {
	int n;
	char last[64];
};

static int on_line(void *ctx, char *line, size_t len, unsigned long lineno)
{
	struct seen *s = ctx;
	(void)lineno;
	s->n++;
	snprintf(s->last, sizeof s->last, "%.*s", (int)len, line);
	return 0;
}

int main(void)
{
	char tmpl[] = "/tmp/test_journal.XXXXXX", path[256], cmd[300];
	char *dir = mkdtemp(tmpl);
	struct cave_journal j;
	struct seen s = { 0, "" };
	cave_err e;
	size_t torn = 99;
	int fd;

	snprintf(path, sizeof path, "%s/a/b/events.ndjson", dir);
	snprintf(cmd, sizeof cmd, "%s/a/b", dir);
	is_int(cave_mkdirs(cmd, &e), 0, "mkdirs");
	is_int(cave_journal_open(&j, path, &torn, &e), 0, "open");
	is_int(torn, 0, "nothing torn in a new file");
	is_int(cave_journal_append(&j, "{\"a\":1}", 7, &e), 0, "append");
	is_int(cave_journal_append(&j, "{\"b\":2}", 7, &e), 0, "append");
	is_int(cave_journal_sync(&j, &e), 0, "sync");
	cave_journal_close(&j);
	is_int(cave_journal_read(path, on_line, &s, &e), 0, "read");
	is_int(s.n, 2, "two lines");
	is_str(s.last, "{\"b\":2}", "in order");

	fd = open(path, O_WRONLY | O_APPEND);
	if (write(fd, "{\"c\":", 5) != 5)
		printf("# short write\n");
	close(fd);
	s.n = 0;
	cave_journal_read(path, on_line, &s, &e);
	is_int(s.n, 2, "a torn line is not delivered");
	is_int(cave_journal_open(&j, path, &torn, &e), 0, "reopen");
	is_int(torn, 5, "the torn tail is cut");
	cave_journal_append(&j, "{\"d\":4}", 7, &e);
	cave_journal_close(&j);
	s.n = 0;
	cave_journal_read(path, on_line, &s, &e);
	is_int(s.n, 3, "appends go on after the cut");
	is_str(s.last, "{\"d\":4}", "the new line is whole");
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("# cleanup failed\n");
	return tap_done();
}

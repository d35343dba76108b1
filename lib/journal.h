/* journal.h: a run's durable journal, .caveman/runs/<run-id>/events.ndjson.
 * One event a line, appended once, in the order the head saw them; synced
 * to disk when the caller asks (always before network work starts). A
 * crash can leave at most a torn last line: reading stops before it, and
 * reopening for append cuts it off. Nothing here interprets an event. */
#ifndef CAVE_JOURNAL_H
#define CAVE_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "msg.h"

struct cave_journal {
	int fd;
	char path[4096];
	unsigned long lines;   /* lines written through this handle */
	bool dirty;            /* written since the last sync */
};

/* Opens (creating, mode 0600) path for append. When the file ends in a
 * torn line (no final '\n'), it is cut back to the last whole line first
 * and *torn (when not NULL) says how many bytes went. -1 with e set (code
 * "io"). */
int cave_journal_open(struct cave_journal *j, const char *path, size_t *torn,
		      cave_err *e);
/* Appends one line (no '\n' in it; one is added). -1 with e set. */
int cave_journal_append(struct cave_journal *j, const char *line, size_t len,
			cave_err *e);
/* Forces what was appended to disk (fdatasync). -1 with e set. */
int cave_journal_sync(struct cave_journal *j, cave_err *e);
void cave_journal_close(struct cave_journal *j);

/* Reads every whole line of path in order, calling fn (line NUL-terminated
 * and writable, lineno from 1). A torn last line is not delivered. fn
 * returns 0 to go on, -1 to stop (cave_journal_read then returns -1).
 * Lines longer than CAVE_EVENT_MAX are an error. */
typedef int (*cave_journal_fn)(void *ctx, char *line, size_t len,
			       unsigned long lineno);
int cave_journal_read(const char *path, cave_journal_fn fn, void *ctx,
		      cave_err *e);

/* Makes every missing directory of path (like mkdir -p, mode 0700). */
int cave_mkdirs(const char *path, cave_err *e);

#endif

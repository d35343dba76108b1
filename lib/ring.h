/* ring.h: spawning the ring of filter processes. The head (the calling
 * process) writes into the first member's stdin and reads the last
 * member's stdout: head -> m1 -> m2 -> ... -> mN -> head. Members share
 * one process group of their own, so the head alone decides when they are
 * told to stop; their stderr is the head's. Nothing here reads or writes
 * events: that is lib/io.h's job in the head. */
#ifndef CAVE_RING_H
#define CAVE_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "msg.h"

#define CAVE_RING_MAX 16

struct cave_ring_member {
	char *argv[32];   /* owned strings, NULL-terminated */
	bool shell;       /* argv[0] is a shell command line (--filter CMD) */
	pid_t pid;
	int status;       /* wait status once reaped */
	bool reaped;
};

struct cave_ring {
	struct cave_ring_member m[CAVE_RING_MAX];
	size_t n;
	int to_ring;      /* write end: the first member's stdin */
	int from_ring;    /* read end: the last member's stdout */
	pid_t pgid;
};

void cave_ring_init(struct cave_ring *r);
/* Appends a program and its arguments (copied; argv NULL-terminated). -1
 * with e set when the ring is full. */
int cave_ring_add(struct cave_ring *r, const char *const *argv, cave_err *e);
/* Appends a shell command line, run as sh -c CMD. */
int cave_ring_add_shell(struct cave_ring *r, const char *cmd, cave_err *e);

/* Finds a cave program: beside the running executable, then on PATH.
 * Returns 0 with the path in out, or -1. */
int cave_ring_find(const char *name, char *out, size_t n);

/* Starts every member. Returns 0, or -1 with e set (the members already
 * started are killed and reaped). to_ring and from_ring are close-on-exec
 * and belong to the caller. */
int cave_ring_start(struct cave_ring *r, cave_err *e);
/* Sends sig to member i when it is still running. */
void cave_ring_signal_one(struct cave_ring *r, size_t i, int sig);
/* Sends sig to every member still running. */
void cave_ring_signal(struct cave_ring *r, int sig);
/* Reaps members that have exited, waiting up to timeout_ms (-1: forever,
 * 0: do not wait) for all of them. Returns how many are still running. */
size_t cave_ring_reap(struct cave_ring *r, int timeout_ms);
/* The first member that failed (exit status not 0, or killed), or NULL.
 * Call after everything is reaped. */
const struct cave_ring_member *cave_ring_failed(const struct cave_ring *r);
/* A one-word name of a member for messages ("cave-call"). */
const char *cave_ring_name(const struct cave_ring_member *m);
/* Closes the head's ends that are still open and frees the argv. */
void cave_ring_free(struct cave_ring *r);

#endif

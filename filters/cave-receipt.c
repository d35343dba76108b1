/* cave-receipt: folds an event stream (a pipe or a run's journal) into one
 * run receipt (lib/receipt.c) and prints it as the last line of stdout, or
 * as a human bill. It only reads and reports: it never changes an event it
 * passes on, and never copies prompt, tool or response text anywhere. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

#include "bill.h"
#include "event.h"
#include "io.h"
#include "msg.h"
#include "receipt.h"

/* The largest bill printed: far past any real run's. */
#define BILL_MAX ((size_t)64 << 20)

static const char usage[] =
	"usage: cave-receipt [OPTIONS] [EVENTS-FILE]\n"
	"Folds events (NDJSON, stdin or EVENTS-FILE) into a run receipt\n"
	"(caveman.agent.run-receipt.v1), printed as one JSON line at the end.\n"
	"  --human          print a bill for people instead of the JSON\n"
	"  --events         pass every event through first, then print the\n"
	"                   receipt as a final {\"type\":\"receipt\",...} event\n"
	"  --catalog FILE   price list (default: $CAVE_CATALOG, else the\n"
	"                   catalog installed beside the program)\n"
	"  -o FILE          also write the receipt to FILE (atomically)\n"
	"  -h, --help       this text\n"
	"Money is an estimated list-price subtotal from the catalog, never an\n"
	"invoice. A call the catalog cannot price is marked unpriced, never $0.\n"
	"Exit: 0 ok, 2 usage, 65 a malformed event (skipped; the receipt of\n"
	"the rest is still printed), 74 I/O error, 78 catalog not loadable\n"
	"(every call is then unpriced; the receipt is still printed).\n";

struct ctx {
	struct cave_io *io;
	struct cave_receipt *r;
	bool events;
	bool parsed_any; /* the first event is read whole, for its run */
	bool bad;
};

static int on_line(void *vctx, char *line, size_t len)
{
	struct ctx *c = vctx;
	struct cave_ev_head h;
	char where[128];
	cave_err e;
	jv ev;

	if (c->events)
		cave_io_pass(c->io, line, len);
	if (c->parsed_any && cave_event_peek(line, len, &h) == 0 &&
	    !cave_receipt_wants(h.type, h.type_len))
		return 0;
	snprintf(where, sizeof where, "%s:%lu", c->io->in_name, c->io->lineno);
	ev = cave_event_parse(line, len, where, &e);
	if (!jv_is_valid(ev)) {
		cave_warn("%s", e.msg);
		c->bad = true;
		return 0;
	}
	c->parsed_any = true;
	if (cave_receipt_fold(c->r, ev, &e) < 0) {
		cave_warn("%s: %s", where, e.msg);
		c->bad = true;
	}
	jv_free(ev);
	return 0;
}

/* Queues the receipt (borrowed) in the form the options asked for. */
static int print_receipt(struct ctx *c, jv rj, bool human)
{
	struct cave_emitter em;
	struct cave_buf b;
	const char *span = cave_receipt_span(c->r);
	jv ev, s;
	int ret = 0;

	if (human) {
		cave_buf_init(&b, BILL_MAX);
		if (cave_bill_format(rj, cave_receipt_unknown_calls(c->r), &b) < 0) {
			cave_warn("the bill is larger than %zu bytes", BILL_MAX);
			ret = -1;
		}
		cave_io_write(c->io, b.data ? b.data : "", b.len);
		cave_buf_free(&b);
	} else if (c->events) {
		cave_emitter_init(&em, "cave-receipt");
		snprintf(em.run, sizeof em.run, "%s", cave_jv_str(rj, "runId", ""));
		if (span)
			snprintf(em.span, sizeof em.span, "%s", span);
		ev = cave_event_new("receipt", "cave-receipt");
		ev = cave_emitter_stamp(&em, ev);
		ev = jv_object_set(ev, jv_string("receipt"), jv_copy(rj));
		cave_io_emit(c->io, ev); /* consumes ev */
	} else {
		s = jv_dump_string(jv_copy(rj), 0);
		cave_io_write(c->io, jv_string_value(s),
			      (size_t)jv_string_length_bytes(jv_copy(s)));
		cave_io_write(c->io, "\n", 1);
		jv_free(s);
	}
	return ret;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "human", no_argument, NULL, 'H' },
		{ "events", no_argument, NULL, 'E' },
		{ "catalog", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *catalog_path = NULL, *out_path = NULL, *in_path = NULL;
	struct cave_catalog *cat = NULL;
	struct ctx c = { 0 };
	struct cave_io io;
	bool human = false;
	unsigned long unknown;
	int opt, in_fd = 0, rc = CAVE_EX_OK, closed;
	cave_err e;
	jv rj;

	cave_set_prog("cave-receipt");
	while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'H': human = true; break;
		case 'E': c.events = true; break;
		case 'c': catalog_path = optarg; break;
		case 'o': out_path = optarg; break;
		case 'h': fputs(usage, stdout); return cave_close_stdout();
		default: fputs(usage, stderr); return CAVE_EX_USAGE;
		}
	}
	if (optind < argc)
		in_path = argv[optind++];
	if (optind < argc) {
		cave_warn("one events file at most, got '%s' too", argv[optind]);
		fputs(usage, stderr);
		return CAVE_EX_USAGE;
	}
	if (human && c.events) {
		cave_warn("--human and --events do not go together");
		return CAVE_EX_USAGE;
	}
	if (in_path && strcmp(in_path, "-") != 0 &&
	    (in_fd = open(in_path, O_RDONLY | O_CLOEXEC)) < 0)
		cave_die(CAVE_EX_IO, "cannot open '%s':", in_path);

	cat = cave_catalog_load(catalog_path, &e);
	if (!cat) {
		cave_warn("%s; every call is unpriced", e.msg);
		rc = CAVE_EX_CONFIG;
	}
	c.r = cave_receipt_new(cat);
	c.io = &io;
	cave_io_init(&io, in_fd, STDOUT_FILENO);
	if (in_fd != 0)
		io.in_name = in_path;
	if (cave_io_run(&io, on_line, &c, &e) < 0) {
		/* the receipt of what came before still counts */
		cave_warn("%s", e.msg);
		if (io.error)
			rc = CAVE_EX_IO;
		else
			c.bad = true;
	}
	if (c.bad && rc == CAVE_EX_OK)
		rc = CAVE_EX_DATA;

	/* The reader went away before the events ended (--events): a quiet
	 * end, and no receipt of a stream only partly read. */
	if (io.out_closed && !io.in_eof)
		goto out;
	rj = cave_receipt_jv(c.r);
	unknown = cave_receipt_unknown_calls(c.r);
	if (unknown)
		cave_warn("%lu model call%s in flight when the events ended: outcome "
			  "unknown, may have been billed, not in the receipt",
			  unknown, unknown == 1 ? "" : "s");
	if (out_path && cave_receipt_write(out_path, rj, &e) < 0) {
		cave_warn("%s", e.msg);
		rc = CAVE_EX_IO;
	}
	if (print_receipt(&c, rj, human) < 0 && rc == CAVE_EX_OK)
		rc = CAVE_EX_SOFTWARE;
	if (cave_io_drain(&io) < 0 && !io.out_closed && rc == CAVE_EX_OK) {
		cave_warn("write error on stdout: %s", strerror(io.error));
		rc = CAVE_EX_IO;
	}
	jv_free(rj);
out:
	cave_receipt_free(c.r);
	cave_catalog_free(cat);
	cave_io_free(&io);
	if (in_fd > 0)
		close(in_fd);
	closed = cave_close_stdout();
	return rc != CAVE_EX_OK ? rc : closed;
}

/* cave-catalog: shows the price catalog and prices usage with it (it will
 * become `cave catalog`). Owns only option parsing and printing; loading,
 * checking and pricing live in lib/catalog.c. It never prints a price it
 * could not compute: an unpriced model is an error, never "0".
 *
 *   cave-catalog [--catalog FILE] --digest | --json | --path | --check
 *   cave-catalog [--catalog FILE] list
 *   cave-catalog [--catalog FILE] show MODEL
 *   cave-catalog [--catalog FILE] price MODEL INPUT OUTPUT [CACHE_READ
 *                [CACHE_WRITE [CACHE_WRITE_1H]]]
 *
 * MODEL is "provider/model" (an alias works too, "fixture/P/M" finds P/M).
 * Exit: 0 ok, 1 model unknown or unpriced, 2 usage, 74 write error,
 * 78 bad or missing catalog. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "msg.h"

static _Noreturn void usage(void)
{
	fprintf(stderr,
		"usage: cave-catalog [--catalog FILE] --digest | --json | --path | --check\n"
		"       cave-catalog [--catalog FILE] list\n"
		"       cave-catalog [--catalog FILE] show MODEL\n"
		"       cave-catalog [--catalog FILE] price MODEL INPUT OUTPUT"
		" [CACHE_READ [CACHE_WRITE [CACHE_WRITE_1H]]]\n");
	exit(CAVE_EX_USAGE);
}

static int64_t count_arg(const char *s, const char *what)
{
	char *end;
	long long v;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 0)
		cave_die(CAVE_EX_USAGE, "%s must be a non-negative whole number: '%s'",
			 what, s);
	return v;
}

static void print_json(jv v) /* consumes v */
{
	jv s = jv_dump_string(v, JV_PRINT_PRETTY | JV_PRINT_SPACE1);
	printf("%s\n", jv_string_value(s));
	jv_free(s);
}

static const struct cave_model *find(const struct cave_catalog *c, const char *id)
{
	const struct cave_model *m = cave_catalog_find_id(c, id);
	if (!m) {
		cave_warn("unknown model '%s' (expected provider/model)", id);
		exit(CAVE_EX_NO);
	}
	return m;
}

static int cmd_price(const struct cave_catalog *c, int argc, char **argv)
{
	struct cave_usage u = { .available = true };
	const struct cave_model *m;
	int64_t pico;
	char usd[32];

	if (argc < 3 || argc > 6)
		usage();
	m = find(c, argv[0]);
	u.input = count_arg(argv[1], "INPUT");
	u.output = count_arg(argv[2], "OUTPUT");
	if (argc > 3)
		u.cache_read = count_arg(argv[3], "CACHE_READ");
	if (argc > 4)
		u.cache_write = count_arg(argv[4], "CACHE_WRITE");
	if (argc > 5)
		u.cache_write_1h = count_arg(argv[5], "CACHE_WRITE_1H");
	if (u.cache_write_1h > u.cache_write)
		cave_die(CAVE_EX_USAGE, "CACHE_WRITE_1H is part of CACHE_WRITE and cannot exceed it");
	if (cave_price_usage(m, &u, &pico) < 0) {
		cave_warn("'%s' is unpriced for this usage", m->id);
		return CAVE_EX_NO;
	}
	printf("%s\n", cave_usd_format(pico, usd));
	return 0;
}

int main(int argc, char **argv)
{
	const char *path = NULL, *cmd;
	struct cave_catalog *c;
	cave_err e = { { 0 }, { 0 }, 0 };
	int ret = 0, i = 1;

	cave_set_prog(argv[0]);
	if (i < argc && !strcmp(argv[i], "--catalog")) {
		if (i + 1 >= argc)
			usage();
		path = argv[i + 1];
		i += 2;
	}
	if (i >= argc)
		usage();
	cmd = argv[i++];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
		usage();
	}
	c = cave_catalog_load(path, &e);
	if (!c)
		cave_die(CAVE_EX_CONFIG, "%s", e.msg);
	if (!strcmp(cmd, "--digest") && i == argc) {
		printf("%s\n", cave_catalog_digest(c));
	} else if (!strcmp(cmd, "--path") && i == argc) {
		printf("%s\n", cave_catalog_path(c));
	} else if (!strcmp(cmd, "--json") && i == argc) {
		print_json(cave_catalog_json(c));
	} else if (!strcmp(cmd, "--check") && i == argc) {
		printf("%s: %zu models, sha256 %s\n", cave_catalog_path(c),
		       cave_catalog_count(c), cave_catalog_digest(c));
	} else if (!strcmp(cmd, "list") && i == argc) {
		for (size_t k = 0; k < cave_catalog_count(c); k++)
			printf("%s\n", cave_catalog_at(c, k)->id);
	} else if (!strcmp(cmd, "show") && i + 1 == argc) {
		const struct cave_model *m = find(c, argv[i]);
		size_t k = (size_t)(m - cave_catalog_at(c, 0));
		jv doc = cave_catalog_json(c);
		jv models = jv_object_get(doc, jv_string("models")); /* consumes doc */
		print_json(jv_array_get(models, (int)k));           /* consumes models */
	} else if (!strcmp(cmd, "price")) {
		ret = cmd_price(c, argc - i, argv + i);
	} else {
		cave_catalog_free(c);
		usage();
	}
	cave_catalog_free(c);
	if (cave_close_stdout())
		ret = CAVE_EX_IO;
	return ret;
}

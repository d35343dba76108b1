/* fixture.c: keys, lookup and recording of the offline exchange corpus.
 * Stores response bytes and the neutral request only; never headers. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "event.h"
#include "fixture.h"
#include "paths.h"

static jv key_object(jv req, const char *target_model)
{
	static const char *const keys[] = { "system", "messages", "tools" };
	jv o = jv_object_set(jv_object(), jv_string("model"), jv_string(target_model));
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		jv v = jv_object_get(jv_copy(req), jv_string(keys[i]));
		if (jv_is_valid(v) && jv_get_kind(v) != JV_KIND_NULL)
			o = jv_object_set(o, jv_string(keys[i]), v);
		else
			jv_free(v);
	}
	return o;
}

void cave_fixture_key(jv req, const char *target_model, char out[CAVE_SHA256_HEX])
{
	jv d = jv_dump_string(key_object(req, target_model), JV_PRINT_SORTED);
	cave_sha256_hex(jv_string_value(d), (size_t)jv_string_length_bytes(jv_copy(d)), out);
	jv_free(d);
}

int cave_fixture_dir(const char *dir, char *out, size_t n)
{
	struct stat st;
	const char *env = getenv("CAVE_FIXTURES");
	if (!dir && env && *env)
		dir = env;
	if (dir) {
		if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
			return -1;
		snprintf(out, n, "%s", dir);
		return 0;
	}
	return cave_data_path("fixtures", out, n);
}

jv cave_fixture_load(const char *dir, const char *key, cave_err *e)
{
	char path[4096];
	FILE *f;
	struct cave_buf b;
	char chunk[65536];
	size_t n;
	jv v;
	snprintf(path, sizeof path, "%s/%s.json", dir, key);
	if (!(f = fopen(path, "rb"))) {
		cave_errf(e, "fixture_miss",
			  "no recorded exchange for this request (key %.12s) in '%s'", key, dir);
		return jv_invalid();
	}
	cave_buf_init(&b, CAVE_EVENT_MAX);
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		if (cave_buf_add(&b, chunk, n) < 0)
			break;
	fclose(f);
	v = jv_parse_sized(b.data ? b.data : "", (int)b.len);
	cave_buf_free(&b);
	if (!jv_is_valid(v) || jv_get_kind(v) != JV_KIND_OBJECT ||
	    !cave_jv_str(v, "body", NULL)) {
		jv_free(v);
		cave_errf(e, "fixture_bad", "'%s': not a recorded exchange", path);
		return jv_invalid();
	}
	return v;
}

int cave_fixture_save(const char *dir, const char *key, jv req, const char *target_model,
		      const char *api, long status, const char *content_type,
		      const char *body, size_t len, cave_err *e)
{
	char path[4096], tmp[4200];
	jv x = jv_object();
	jv d;
	int fd, ret = -1;
	size_t dl;
	x = jv_object_set(x, jv_string("key"), jv_string(key));
	x = jv_object_set(x, jv_string("api"), jv_string(api));
	x = jv_object_set(x, jv_string("model"), jv_string(target_model));
	x = jv_object_set(x, jv_string("status"), jv_number((double)status));
	x = jv_object_set(x, jv_string("content_type"),
			  jv_string(content_type ? content_type : ""));
	x = jv_object_set(x, jv_string("body"), jv_string_sized(body, (int)len));
	x = jv_object_set(x, jv_string("request"), key_object(req, target_model));
	d = jv_dump_string(x, JV_PRINT_PRETTY);
	dl = (size_t)jv_string_length_bytes(jv_copy(d));
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		cave_errf(e, "io", "cannot create '%s': %s", dir, strerror(errno));
		goto out;
	}
	snprintf(path, sizeof path, "%s/%s.json", dir, key);
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
		cave_errf(e, "io", "cannot create '%s': %s", tmp, strerror(errno));
		goto out;
	}
	if (write(fd, jv_string_value(d), dl) != (ssize_t)dl || write(fd, "\n", 1) != 1 ||
	    fsync(fd) < 0) {
		cave_errf(e, "io", "cannot write '%s': %s", tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		goto out;
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		cave_errf(e, "io", "cannot rename to '%s': %s", path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	ret = 0;
out:
	jv_free(d);
	return ret;
}

/* agent.c: loads and checks agent.yaml, resolves tool commands inside the
 * agent directory, and digests the directory. It never executes a tool and
 * never follows a command out of the agent directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "buf.h"
#include "catalog.h"
#include "ledger.h"
#include "proto.h"
#include "yaml.h"

static const char *const top_keys[] = {
	"id", "model", "api", "system", "reasoning", "max_output_tokens",
	"sandbox", "tools", "subagents", "evals", "description", NULL,
};
static const char *const tool_keys[] = {
	"name", "description", "input_schema", "effect", "command",
	"timeout_ms", "allow_repeat", "network", "host_loopback", NULL,
};
static const char *const sub_keys[] = {
	"name", "description", "agent", "input_schema", "max_cost_usd",
	"max_tokens", "effect", NULL,
};

static bool in_list(const char *const *l, const char *s)
{
	for (; *l; l++)
		if (strcmp(*l, s) == 0)
			return true;
	return false;
}

static jv member(jv o, const char *k) /* borrows o; returns a new jv */
{
	return jv_object_get(jv_copy(o), jv_string(k));
}

/* The string member k of o, copied, or NULL; -1 when present and not a
 * non-empty string. */
static int get_str(jv o, const char *k, char **out)
{
	jv v = member(o, k);
	int ret = 0;
	*out = NULL;
	if (jv_get_kind(v) == JV_KIND_STRING && jv_string_length_bytes(jv_copy(v)) > 0)
		*out = cave_xstrdup(jv_string_value(v));
	else if (jv_is_valid(v) && jv_get_kind(v) != JV_KIND_NULL)
		ret = -1;
	jv_free(v);
	return ret;
}

/* An integer member in [lo, hi], or dflt when absent; -1 when bad. */
/* An optional boolean (false when absent); -1 when it is something else. */
static int get_bool(jv o, const char *k, bool *out)
{
	jv v = member(o, k);
	jv_kind kind = jv_get_kind(v);
	jv_free(v);
	*out = kind == JV_KIND_TRUE;
	return kind == JV_KIND_TRUE || kind == JV_KIND_FALSE || kind == JV_KIND_INVALID ||
	       kind == JV_KIND_NULL ? 0 : -1;
}

static int get_long(jv o, const char *k, long lo, long hi, long dflt, long *out)
{
	jv v = member(o, k);
	int ret = 0;
	*out = dflt;
	if (jv_get_kind(v) == JV_KIND_NUMBER) {
		double d = jv_number_value(v);
		if (d != (double)(long)d || d < (double)lo || d > (double)hi)
			ret = -1;
		else
			*out = (long)d;
	} else if (jv_is_valid(v) && jv_get_kind(v) != JV_KIND_NULL) {
		ret = -1;
	}
	jv_free(v);
	return ret;
}

static bool valid_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
			return false;
	return true;
}

static int unknown_key(jv o, const char *const *keys, const char *name,
		       const char *where, cave_err *e)
{
	int ret = 0;
	jv_object_foreach(o, k, v) {
		if (!ret && !in_list(keys, jv_string_value(k)))
			ret = cave_errf(e, "agent", "%s: %sunknown field '%.60s'", name,
					where, jv_string_value(k));
		jv_free(k);
		jv_free(v);
	}
	return ret;
}

/* Splits "provider/model" (fixture/P/M: provider "fixture") and picks the
 * wire protocol: api if given, else the provider's default. */
static int parse_model(struct cave_agent *a, const char *name, cave_err *e)
{
	const char *slash = strchr(a->model_id, '/');
	char inner[64];
	const char *target;
	int api;
	if (!slash || slash == a->model_id || !slash[1])
		return cave_errf(e, "agent", "%s: model: expected PROVIDER/MODEL, got '%.100s'",
				 name, a->model_id);
	a->provider = cave_xstrndup(a->model_id, (size_t)(slash - a->model_id));
	a->model = cave_xstrdup(slash + 1);
	target = a->provider;
	if (strcmp(a->provider, "fixture") == 0) {
		const char *s2 = strchr(a->model, '/');
		if (!s2 || s2 == a->model || (size_t)(s2 - a->model) >= sizeof inner)
			return cave_errf(e, "agent", "%s: model: a fixture model is "
					 "fixture/PROVIDER/MODEL, got '%.100s'", name, a->model_id);
		snprintf(inner, sizeof inner, "%.*s", (int)(s2 - a->model), a->model);
		target = inner;
	}
	if (a->api) {
		if (cave_api_parse(a->api) < 0)
			return cave_errf(e, "agent", "%s: api: unknown protocol '%.60s'", name, a->api);
		return 0;
	}
	if ((api = cave_api_default(target)) < 0)
		return cave_errf(e, "agent", "%s: model: no wire protocol known for "
				 "provider '%.60s'; name one with 'api'", name, target);
	a->api = cave_xstrdup(cave_api_name((enum cave_api)api));
	return 0;
}

/* Resolves a tool command inside dir: it must exist, be executable and
 * stay inside the directory once symlinks are followed. */
static int resolve_command(const char *dir, const char *cmd, char **out,
			   const char *name, const char *where, cave_err *e)
{
	char joined[PATH_MAX], real[PATH_MAX];
	size_t dl = strlen(dir);
	if (cmd[0] == '/')
		return cave_errf(e, "agent", "%s: %scommand: must be relative to the agent "
				 "directory, got '%.100s'", name, where, cmd);
	if ((size_t)snprintf(joined, sizeof joined, "%s/%s", dir, cmd) >= sizeof joined)
		return cave_errf(e, "agent", "%s: %scommand: path too long", name, where);
	if (!realpath(joined, real))
		return cave_errf(e, "agent", "%s: %scommand: '%.100s': %s", name, where, cmd,
				 strerror(errno));
	if (strncmp(real, dir, dl) != 0 || real[dl] != '/')
		return cave_errf(e, "agent", "%s: %scommand: '%.100s' leads out of the agent "
				 "directory", name, where, cmd);
	if (access(real, X_OK) < 0)
		return cave_errf(e, "agent", "%s: %scommand: '%.100s' is not executable",
				 name, where, cmd);
	*out = cave_xstrdup(real);
	return 0;
}

static int usd_pico(jv v, int64_t *out)
{
	jv s;
	int ret;
	if (jv_get_kind(v) != JV_KIND_NUMBER || jv_number_value(v) < 0)
		return -1;
	s = jv_dump_string(jv_copy(v), 0);
	ret = cave_amount_parse(CAVE_DENOM_USD, jv_string_value(s), out); /* 1e-06 too */
	jv_free(s);
	return ret;
}

/* One entry of tools: or subagents: (t consumed) into out. */
static int load_tool(jv t, bool sub, size_t i, const char *name, const char *dir,
		     struct cave_agent_tool *out, cave_err *e)
{
	char where[48];
	char *effect = NULL, *cmd = NULL, *target = NULL;
	jv schema = jv_invalid(), v = jv_invalid();
	int ret = -1;
	long n;

	snprintf(where, sizeof where, "%s[%zu]: ", sub ? "subagents" : "tools", i);
	memset(out, 0, sizeof *out);
	out->input_schema = jv_null();
	out->max_cost_pico = out->max_tokens = -1;
	if (jv_get_kind(t) != JV_KIND_OBJECT) {
		cave_errf(e, "agent", "%s: %sexpected a mapping", name, where);
		goto out;
	}
	if (unknown_key(t, sub ? sub_keys : tool_keys, name, where, e) < 0)
		goto out;
	if (get_str(t, "name", &out->name) < 0 || !out->name) {
		cave_errf(e, "agent", "%s: %smissing 'name'", name, where);
		goto out;
	}
	if (!valid_name(out->name)) {
		cave_errf(e, "agent", "%s: %sname: '%.64s' is not 1-64 of [A-Za-z0-9_-]",
			  name, where, out->name);
		goto out;
	}
	if (strncmp(out->name, "cave_", 5) == 0) {
		cave_errf(e, "agent", "%s: %sname: '%.64s': names starting 'cave_' are reserved",
			  name, where, out->name);
		goto out;
	}
	if (get_str(t, "description", &out->description) < 0 || !out->description) {
		cave_errf(e, "agent", "%s: %smissing 'description'", name, where);
		goto out;
	}
	schema = member(t, "input_schema");
	if (!jv_is_valid(schema) && sub) {
		jv_free(schema);
		schema = jv_parse("{\"type\":\"object\",\"properties\":{\"task\":"
				  "{\"type\":\"string\"}},\"required\":[\"task\"]}");
	}
	if (jv_get_kind(schema) != JV_KIND_OBJECT) {
		cave_errf(e, "agent", "%s: %s%s 'input_schema'", name, where,
			  jv_is_valid(schema) ? "expected a JSON Schema object at" : "missing");
		goto out;
	}
	out->input_schema = schema; /* hands over */
	schema = jv_invalid();
	if (get_str(t, "effect", &effect) < 0 || (!effect && !sub)) {
		cave_errf(e, "agent", "%s: %smissing 'effect'", name, where);
		goto out;
	}
	if (effect && strcmp(effect, "read") && strcmp(effect, "write")) {
		cave_errf(e, "agent", "%s: %seffect: expected read or write, got '%.20s'",
			  name, where, effect);
		goto out;
	}
	out->write = effect && strcmp(effect, "write") == 0;
	if (!sub) {
		if (get_str(t, "command", &cmd) < 0 || !cmd) {
			cave_errf(e, "agent", "%s: %smissing 'command'", name, where);
			goto out;
		}
		if (dir && resolve_command(dir, cmd, &out->command, name, where, e) < 0)
			goto out;
		if (!dir)
			out->command = cave_xstrdup(cmd);
		if (get_long(t, "timeout_ms", 1, 86400000, 30000, &n) < 0) {
			cave_errf(e, "agent", "%s: %stimeout_ms: expected 1 to 86400000", name, where);
			goto out;
		}
		out->timeout_ms = n;
		static const char *const flags[] = { "allow_repeat", "network", "host_loopback" };
		bool *dst[] = { &out->allow_repeat, &out->network, &out->host_loopback };
		for (size_t k = 0; k < 3; k++)
			if (get_bool(t, flags[k], dst[k]) < 0) {
				cave_errf(e, "agent", "%s: %s%s: expected true or false", name,
					  where, flags[k]);
				goto out;
			}
		if (out->host_loopback && !out->network) {
			cave_errf(e, "agent", "%s: %shost_loopback: needs network: true", name, where);
			goto out;
		}
	} else {
		char joined[PATH_MAX], real[PATH_MAX];
		if (get_str(t, "agent", &target) < 0 || !target) {
			cave_errf(e, "agent", "%s: %smissing 'agent'", name, where);
			goto out;
		}
		if (dir) {
			if (target[0] == '/')
				snprintf(joined, sizeof joined, "%s", target);
			else
				snprintf(joined, sizeof joined, "%s/%s", dir, target);
			if (!realpath(joined, real)) {
				cave_errf(e, "agent", "%s: %sagent: '%.100s': %s", name, where,
					  target, strerror(errno));
				goto out;
			}
			out->subagent_dir = cave_xstrdup(real);
		} else {
			out->subagent_dir = cave_xstrdup(target);
		}
		v = member(t, "max_cost_usd");
		if (jv_is_valid(v) && usd_pico(v, &out->max_cost_pico) < 0) {
			cave_errf(e, "agent", "%s: %smax_cost_usd: expected a non-negative "
				  "amount in USD", name, where);
			goto out;
		}
		if (get_long(t, "max_tokens", 1, 1000000000L, -1, &n) < 0) {
			cave_errf(e, "agent", "%s: %smax_tokens: expected a positive integer",
				  name, where);
			goto out;
		}
		out->max_tokens = n;
		if (out->max_cost_pico < 0 && out->max_tokens < 0) {
			cave_errf(e, "agent", "%s: %sa subagent needs 'max_cost_usd' or "
				  "'max_tokens'", name, where);
			goto out;
		}
		out->timeout_ms = 0;
	}
	ret = 0;
out:
	jv_free(t);
	jv_free(schema);
	jv_free(v);
	free(effect);
	free(cmd);
	free(target);
	return ret;
}

static void tool_free(struct cave_agent_tool *t)
{
	free(t->name);
	free(t->description);
	jv_free(t->input_schema);
	free(t->command);
	free(t->subagent_dir);
}

static int load_list(jv def, const char *key, bool sub, const char *name,
		     const char *dir, struct cave_agent *a, cave_err *e)
{
	jv list = member(def, key);
	int ret = -1, n, i;
	if (!jv_is_valid(list) || jv_get_kind(list) == JV_KIND_NULL) {
		ret = 0;
		goto out;
	}
	if (jv_get_kind(list) != JV_KIND_ARRAY) {
		cave_errf(e, "agent", "%s: %s: expected a list", name, key);
		goto out;
	}
	n = jv_array_length(jv_copy(list));
	if ((size_t)n + a->ntools > CAVE_AGENT_MAX_TOOLS) {
		cave_errf(e, "agent", "%s: %s: more than %d tools", name, key, CAVE_AGENT_MAX_TOOLS);
		goto out;
	}
	a->tools = cave_xrealloc(a->tools, (a->ntools + (size_t)n + 1) * sizeof *a->tools);
	for (i = 0; i < n; i++) {
		struct cave_agent_tool *t = &a->tools[a->ntools];
		if (load_tool(jv_array_get(jv_copy(list), i), sub, (size_t)i, name, dir, t, e) < 0) {
			tool_free(t);
			goto out;
		}
		a->ntools++;
		for (size_t j = 0; j + 1 < a->ntools; j++)
			if (strcmp(a->tools[j].name, t->name) == 0) {
				cave_errf(e, "agent", "%s: %s[%d]: name: '%.64s' is declared twice",
					  name, key, i, t->name);
				goto out;
			}
	}
	ret = 0;
out:
	jv_free(list);
	return ret;
}

int cave_agent_from_jv(jv def, const char *name, const char *dir,
		       struct cave_agent *a, cave_err *e)
{
	char *sandbox = NULL;
	long n;
	int ret = -1;

	memset(a, 0, sizeof *a);
	a->def = jv_copy(def);
	a->dir = dir ? cave_xstrdup(dir) : NULL;
	if (jv_get_kind(def) != JV_KIND_OBJECT) {
		cave_errf(e, "agent", "%s: expected a mapping at the top", name);
		goto out;
	}
	if (unknown_key(def, top_keys, name, "", e) < 0)
		goto out;
	if (get_str(def, "id", &a->id) < 0 || !a->id) {
		cave_errf(e, "agent", "%s: missing 'id'", name);
		goto out;
	}
	if (!valid_name(a->id)) {
		cave_errf(e, "agent", "%s: id: '%.64s' is not 1-64 of [A-Za-z0-9_-]", name, a->id);
		goto out;
	}
	if (get_str(def, "model", &a->model_id) < 0 || !a->model_id) {
		cave_errf(e, "agent", "%s: missing 'model'", name);
		goto out;
	}
	if (get_str(def, "api", &a->api) < 0) {
		cave_errf(e, "agent", "%s: api: expected a string", name);
		goto out;
	}
	if (parse_model(a, name, e) < 0)
		goto out;
	if (get_str(def, "system", &a->system) < 0) {
		cave_errf(e, "agent", "%s: system: expected a string", name);
		goto out;
	}
	if (get_str(def, "reasoning", &a->reasoning) < 0 ||
	    (a->reasoning && strcmp(a->reasoning, "low") && strcmp(a->reasoning, "medium") &&
	     strcmp(a->reasoning, "high"))) {
		cave_errf(e, "agent", "%s: reasoning: expected low, medium, high or null", name);
		goto out;
	}
	if (get_long(def, "max_output_tokens", 1, 10000000, 1024, &n) < 0) {
		cave_errf(e, "agent", "%s: max_output_tokens: expected 1 to 10000000", name);
		goto out;
	}
	a->max_output_tokens = n;
	if (get_str(def, "sandbox", &sandbox) < 0 ||
	    (sandbox && strcmp(sandbox, "required") && strcmp(sandbox, "host"))) {
		cave_errf(e, "agent", "%s: sandbox: expected required or host", name);
		goto out;
	}
	a->sandbox_host = sandbox && strcmp(sandbox, "host") == 0;
	if (load_list(def, "tools", false, name, dir, a, e) < 0 ||
	    load_list(def, "subagents", true, name, dir, a, e) < 0)
		goto out;
	ret = 0;
out:
	free(sandbox);
	if (ret < 0)
		cave_agent_free(a);
	return ret;
}

int cave_agent_load(const char *dir, struct cave_agent *a, cave_err *e)
{
	char real[PATH_MAX], path[PATH_MAX + 16];
	jv def;
	int ret = -1;

	memset(a, 0, sizeof *a);
	a->def = jv_null();
	if (!realpath(dir, real))
		return cave_errf(e, "agent", "cannot open agent directory '%.200s': %s",
				 dir, strerror(errno));
	snprintf(path, sizeof path, "%s/agent.yaml", real);
	if (access(path, R_OK) < 0)
		return cave_errf(e, "agent", "cannot open '%.200s/agent.yaml': %s", dir,
				 strerror(errno));
	def = cave_yaml_load(path, e);
	if (!jv_is_valid(def)) {
		jv_free(def);
		if (e)
			snprintf(e->code, sizeof e->code, "agent");
		return -1;
	}
	jv_free(a->def);
	{
		char name[PATH_MAX + 16];
		snprintf(name, sizeof name, "%s/agent.yaml", dir);
		ret = cave_agent_from_jv(def, name, real, a, e);
	}
	jv_free(def);
	if (ret == 0 && cave_agent_digest(real, a->digest, e) < 0) {
		cave_agent_free(a);
		ret = -1;
	}
	return ret;
}

void cave_agent_free(struct cave_agent *a)
{
	for (size_t i = 0; i < a->ntools; i++)
		tool_free(&a->tools[i]);
	free(a->tools);
	free(a->dir);
	free(a->id);
	free(a->model_id);
	free(a->provider);
	free(a->model);
	free(a->api);
	free(a->system);
	free(a->reasoning);
	jv_free(a->def);
	memset(a, 0, sizeof *a);
	a->def = jv_null();
}

jv cave_agent_request_tools(const struct cave_agent *a)
{
	jv out = jv_array();
	for (size_t i = 0; i < a->ntools; i++) {
		jv t = jv_object();
		t = jv_object_set(t, jv_string("name"), jv_string(a->tools[i].name));
		t = jv_object_set(t, jv_string("description"), jv_string(a->tools[i].description));
		t = jv_object_set(t, jv_string("input_schema"), jv_copy(a->tools[i].input_schema));
		out = jv_array_append(out, t);
	}
	return out;
}

const struct cave_agent_tool *cave_agent_tool(const struct cave_agent *a,
					      const char *name)
{
	for (size_t i = 0; i < a->ntools; i++)
		if (strcmp(a->tools[i].name, name) == 0)
			return &a->tools[i];
	return NULL;
}

/* ---- digest ------------------------------------------------------------ */

struct walk {
	char **paths;
	size_t n, cap;
	uint64_t bytes;
};

static int collect(const char *root, const char *rel, struct walk *w, cave_err *e)
{
	char path[PATH_MAX];
	DIR *d;
	struct dirent *de;
	int ret = -1;

	snprintf(path, sizeof path, "%s%s%s", root, *rel ? "/" : "", rel);
	if (!(d = opendir(path)))
		return cave_errf(e, "agent", "cannot read '%.200s': %s", path, strerror(errno));
	while ((de = readdir(d))) {
		char sub[PATH_MAX], full[PATH_MAX];
		struct stat st;
		if (de->d_name[0] == '.')
			continue; /* hidden files, run state (.caveman) and . .. */
		if ((size_t)snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "",
				     de->d_name) >= sizeof sub) {
			cave_errf(e, "agent", "path too long under '%.200s'", root);
			goto out;
		}
		if ((size_t)snprintf(full, sizeof full, "%s/%s", root, sub) >= sizeof full) {
			cave_errf(e, "agent", "path too long under '%.200s'", root);
			goto out;
		}
		if (lstat(full, &st) < 0) {
			cave_errf(e, "agent", "cannot stat '%.200s': %s", full, strerror(errno));
			goto out;
		}
		if (S_ISDIR(st.st_mode)) {
			if (collect(root, sub, w, e) < 0)
				goto out;
			continue;
		}
		if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
			continue;
		if (w->n >= CAVE_AGENT_MAX_FILES) {
			cave_errf(e, "agent", "'%.200s': more than %d files", root, CAVE_AGENT_MAX_FILES);
			goto out;
		}
		w->bytes += (uint64_t)st.st_size;
		if (w->bytes > CAVE_AGENT_MAX_BYTES) {
			cave_errf(e, "agent", "'%.200s': more than %llu bytes", root,
				  (unsigned long long)CAVE_AGENT_MAX_BYTES);
			goto out;
		}
		if (w->n == w->cap) {
			w->cap = w->cap ? w->cap * 2 : 64;
			w->paths = cave_xrealloc(w->paths, w->cap * sizeof *w->paths);
		}
		w->paths[w->n++] = cave_xstrdup(sub);
	}
	ret = 0;
out:
	closedir(d);
	return ret;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int hash_one(struct cave_sha256 *h, const char *root, const char *rel, cave_err *e)
{
	char full[PATH_MAX], num[32], buf[65536];
	struct stat st;
	int fd, ret = -1;
	ssize_t r;
	snprintf(full, sizeof full, "%s/%s", root, rel);
	if (lstat(full, &st) < 0)
		return cave_errf(e, "agent", "cannot stat '%.200s': %s", full, strerror(errno));
	cave_sha256_update(h, rel, strlen(rel) + 1);
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlink(full, buf, sizeof buf);
		if (n < 0)
			return cave_errf(e, "agent", "cannot read link '%.200s': %s", full,
					 strerror(errno));
		snprintf(num, sizeof num, "%zd", n);
		cave_sha256_update(h, num, strlen(num) + 1);
		cave_sha256_update(h, buf, (size_t)n);
		return 0;
	}
	snprintf(num, sizeof num, "%lld", (long long)st.st_size);
	cave_sha256_update(h, num, strlen(num) + 1);
	if ((fd = open(full, O_RDONLY | O_CLOEXEC)) < 0)
		return cave_errf(e, "agent", "cannot open '%.200s': %s", full, strerror(errno));
	while ((r = read(fd, buf, sizeof buf)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			cave_errf(e, "agent", "cannot read '%.200s': %s", full, strerror(errno));
			goto out;
		}
		cave_sha256_update(h, buf, (size_t)r);
	}
	ret = 0;
out:
	close(fd);
	return ret;
}

int cave_agent_digest(const char *dir, char out[CAVE_SHA256_HEX], cave_err *e)
{
	struct walk w = { 0 };
	struct cave_sha256 *h = NULL;
	int ret = -1;

	if (collect(dir, "", &w, e) < 0)
		goto out;
	qsort(w.paths, w.n, sizeof *w.paths, cmp_path);
	h = cave_sha256_new();
	for (size_t i = 0; i < w.n; i++)
		if (hash_one(h, dir, w.paths[i], e) < 0)
			goto out;
	cave_sha256_final(h, out);
	h = NULL;
	ret = 0;
out:
	if (h)
		cave_sha256_final(h, out);
	for (size_t i = 0; i < w.n; i++)
		free(w.paths[i]);
	free(w.paths);
	return ret;
}

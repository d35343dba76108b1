/* test_agent.c: agent.yaml checks (lib/agent.c): the fields, the messages
 * naming the place, reserved names, and the directory digest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "tap.h"
#include "yaml.h"

static int load(const char *yaml, struct cave_agent *a, cave_err *e)
{
	jv def = cave_yaml_parse(yaml, strlen(yaml), "agent.yaml", e);
	int ret;
	if (!jv_is_valid(def)) {
		jv_free(def);
		return -1;
	}
	ret = cave_agent_from_jv(def, "agent.yaml", NULL, a, e);
	jv_free(def);
	return ret;
}

#define TOOL "tools:\n  - name: lookup\n    description: d\n    input_schema: {type: object}\n"

static void check_err(const char *yaml, const char *want, const char *name)
{
	struct cave_agent a;
	cave_err e = { { 0 }, { 0 }, 0 };
	int r = load(yaml, &a, &e);
	ok(r < 0 && strstr(e.msg, want), "%s", name);
	if (r == 0)
		cave_agent_free(&a);
	else if (!strstr(e.msg, want))
		printf("#   got '%s'\n", e.msg);
}

static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");
	fputs(s, f);
	fclose(f);
}

int main(void)
{
	struct cave_agent a;
	cave_err e = { { 0 }, { 0 }, 0 };
	char tmpl[] = "/tmp/test_agent.XXXXXX", *dir, d1[CAVE_SHA256_HEX], d2[CAVE_SHA256_HEX];
	char p[256];

	is_int(load("id: s\nmodel: fixture/anthropic/claude-haiku-4-5\n" TOOL
		    "    effect: read\n    command: tools/x\n", &a, &e), 0, "a whole agent loads");
	is_str(a.provider, "fixture", "fixture provider");
	is_str(a.model, "anthropic/claude-haiku-4-5", "fixture model keeps P/M");
	is_str(a.api, "anthropic-messages", "api from the impersonated provider");
	is_int(a.max_output_tokens, 1024, "default output allowance");
	is_int(a.ntools, 1, "one tool");
	is_int(a.tools[0].timeout_ms, 30000, "default tool timeout");
	ok(!a.sandbox_host, "sandbox defaults to required");
	ok(!a.tools[0].network, "a tool has no network unless it says so");
	{
		jv t = cave_agent_request_tools(&a);
		jv d = jv_dump_string(t, 0);
		is_str(jv_string_value(d), "[{\"name\":\"lookup\",\"description\":\"d\","
		       "\"input_schema\":{\"type\":\"object\"}}]", "request tools");
		jv_free(d);
	}
	cave_agent_free(&a);

	check_err("id: s\nmodel: openai/gpt-5-mini\n" TOOL "    command: x\n",
		  "agent.yaml: tools[0]: missing 'effect'", "missing effect names the tool");
	check_err("id: s\nmodel: openai/gpt-5-mini\n" TOOL "    effect: delete\n    command: x\n",
		  "tools[0]: effect: expected read or write", "bad effect");
	check_err("id: s\nmodel: openai/gpt-5-mini\ntools:\n  - name: cave_x\n    description: d\n"
		  "    input_schema: {}\n    effect: read\n    command: x\n",
		  "reserved", "cave_ names are reserved");
	check_err("model: openai/gpt-5-mini\n", "missing 'id'", "missing id");
	check_err("id: s\nmodel: gpt\n", "expected PROVIDER/MODEL", "model without provider");
	check_err("id: s\nmodel: openai/x\nsandbox: maybe\n", "sandbox: expected", "bad sandbox");
	check_err("id: s\nmodel: openai/x\ncolour: red\n", "unknown field 'colour'", "unknown field");
	check_err("id: s\nmodel: openai/x\nsubagents:\n  - name: b\n    description: d\n"
		  "    agent: ../b\n", "needs 'max_cost_usd' or 'max_tokens'", "subagent wallet");
	is_int(load("id: s\nmodel: openai/x\n" TOOL "    effect: read\n    command: x\n"
		    "    network: true\n", &a, &e), 0, "network: true loads");
	ok(a.ntools == 1 && a.tools[0].network, "network: true is kept");
	cave_agent_free(&a);
	check_err("id: s\nmodel: openai/x\n" TOOL "    effect: read\n    command: x\n"
		  "    network: {host_loopback: true}\n", "tools[0]: network: expected true or false",
		  "network must be a boolean");
	check_err("id: s\nmodel: openai/x\n" TOOL "    effect: read\n    command: x\n"
		  "    host_loopback: true\n", "tools[0]: host_loopback: needs network: true",
		  "host_loopback needs network");
	is_int(load("id: s\nmodel: openai/x\n" TOOL "    effect: read\n    command: x\n"
		    "    network: true\n    host_loopback: true\n", &a, &e), 0,
	       "network with a declared host_loopback loads");
	ok(a.ntools == 1 && a.tools[0].network && a.tools[0].host_loopback,
	   "host_loopback is kept");
	cave_agent_free(&a);
	check_err("id: s\nmodel: [x\n", "agent.yaml:", "YAML errors carry the place");
	check_err("id: s\nmodel: openai/x\n" TOOL "    effect: read\n    command: x\n"
		  "  - name: lookup\n    description: d\n    input_schema: {}\n    effect: read\n"
		  "    command: y\n", "declared twice", "duplicate tool");

	dir = mkdtemp(tmpl);
	snprintf(p, sizeof p, "%s/tools", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof p, "%s/agent.yaml", dir);
	write_file(p, "id: s\nmodel: openai/gpt-5-mini\n" TOOL "    effect: read\n    command: tools/x\n");
	snprintf(p, sizeof p, "%s/tools/x", dir);
	write_file(p, "#!/bin/sh\necho hi\n");
	chmod(p, 0755);
	is_int(cave_agent_load(dir, &a, &e), 0, "loads from a directory");
	ok(a.tools[0].command && strstr(a.tools[0].command, "/tools/x"), "command resolved");
	cave_agent_free(&a);
	is_int(cave_agent_digest(dir, d1, &e), 0, "digest");
	is_int(cave_agent_digest(dir, d2, &e), 0, "digest again");
	is_str(d1, d2, "digest is stable");
	write_file(p, "#!/bin/sh\necho bye\n");
	cave_agent_digest(dir, d2, &e);
	ok(strcmp(d1, d2) != 0, "a tool change changes the digest");
	chmod(p, 0644);
	snprintf(p, sizeof p, "%s/agent.yaml", dir);
	ok(cave_agent_load(dir, &a, &e) < 0 && strstr(e.msg, "not executable"),
	   "a tool that is not executable is refused");
	snprintf(p, sizeof p, "rm -rf '%s'", dir);
	if (system(p) != 0)
		printf("# cleanup failed\n");
	return tap_done();
}

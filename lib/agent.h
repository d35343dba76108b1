/* agent.h: agent definitions. An agent is a directory holding agent.yaml
 * (schemas/agent.schema.json) and the files its tools run. Loading checks
 * every field and names the place of the first problem; the digest binds
 * the definition, its tools and every other file under the directory.
 * Nothing here runs a tool or talks to a provider. */
#ifndef CAVE_AGENT_H
#define CAVE_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jv.h>

#include "digest.h"
#include "msg.h"

/* Limits past which a definition is refused, not truncated. */
#define CAVE_AGENT_MAX_TOOLS 128
#define CAVE_AGENT_MAX_FILES 4096
#define CAVE_AGENT_MAX_BYTES ((uint64_t)256 << 20)

struct cave_agent_tool {
	char *name;
	char *description;
	jv input_schema;      /* owned */
	bool write;           /* effect: write (else read) */
	char *command;        /* absolute path, inside the agent directory */
	long timeout_ms;
	bool allow_repeat;    /* repeated calls are not a loop (polling tools) */
	bool network;         /* network: true (a user-mode network, no host loopback) */
	bool host_loopback;   /* ...that reaches the host's loopback (declared) */
	/* a subagent: a tool whose target is another agent directory */
	char *subagent_dir;   /* absolute, NULL for a command tool */
	int64_t max_cost_pico;/* subagent wallet in pico-USD, -1 when unset */
	int64_t max_tokens;   /* subagent wallet in tokens, -1 when unset */
};

struct cave_agent {
	char *dir;            /* absolute directory */
	char *id;
	char *model_id;       /* as written: "fixture/anthropic/claude-haiku-4-5" */
	char *provider;       /* "fixture" */
	char *model;          /* "anthropic/claude-haiku-4-5" */
	char *api;            /* wire protocol name */
	char *system;         /* NULL when none */
	char *reasoning;      /* NULL, "low", "medium" or "high" */
	long max_output_tokens;
	bool sandbox_host;    /* sandbox: host (else required) */
	struct cave_agent_tool *tools;
	size_t ntools;
	char digest[CAVE_SHA256_HEX];
	jv def;               /* the parsed agent.yaml (owned) */
};

/* Loads dir/agent.yaml. Returns 0, or -1 with e set (code "agent") and the
 * message naming the file and field: "DIR/agent.yaml: tools[0]: missing
 * 'effect'", or line and column for YAML errors. On error a is freed. */
int cave_agent_load(const char *dir, struct cave_agent *a, cave_err *e);
void cave_agent_free(struct cave_agent *a);

/* Validates an already parsed definition (def borrowed); name is used in
 * messages; dir is the agent directory (for tool commands), or NULL to
 * skip the file checks. */
int cave_agent_from_jv(jv def, const char *name, const char *dir,
		       struct cave_agent *a, cave_err *e);

/* sha256 over the directory: for each regular file and symlink under dir
 * (hidden names skipped), in byte order of relative path: the path, a NUL,
 * the length in decimal, a NUL, the bytes (a symlink: its target). -1 with
 * e set when it cannot be read or passes the limits above. */
int cave_agent_digest(const char *dir, char out[CAVE_SHA256_HEX], cave_err *e);

/* The tools as a call.request wants them: [{name, description,
 * input_schema}] (a new array; empty when the agent has none). */
jv cave_agent_request_tools(const struct cave_agent *a);
/* The tool named name, or NULL. */
const struct cave_agent_tool *cave_agent_tool(const struct cave_agent *a,
					      const char *name);

#endif

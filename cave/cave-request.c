/* cave-request: turns flags and a prompt into a run.start and one
 * call.request event on stdout, the head of a straight pipe:
 *   cave request -m anthropic/claude-haiku-4-5 "..." | cave-call | cave-receipt
 * It never talks to a provider and never reads a credential. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "digest.h"
#include "event.h"
#include "msg.h"
#include "proto.h"

/* The embedded offline default: a recorded corpus, no key, no network. */
#define DEFAULT_MODEL "fixture/anthropic/claude-haiku-4-5"

static const char usage[] =
	"usage: cave request [OPTIONS] PROMPT...   (PROMPT '-' reads stdin)\n"
	"  -m, --model PROVIDER/MODEL   model to call (default " DEFAULT_MODEL ")\n"
	"  -s, --system TEXT            system prompt\n"
	"      --max-output-tokens N    output allowance (default 1024)\n"
	"      --api API                anthropic-messages, openai-chat,\n"
	"                               openai-responses or gemini\n"
	"      --no-stream              ask for one whole response\n"
	"      --reasoning LEVEL        low, medium or high\n"
	"      --tools FILE             JSON array of {name,description,input_schema}\n"
	"      --messages FILE          JSON array of messages (the prompt, if any,\n"
	"                               is appended as a user message)\n"
	"      --agent ID               agent id for the receipt (default adhoc)\n"
	"      --id ID                  call id (default c1)\n";

static jv load_json_file(const char *path, const char *what)
{
	FILE *f = fopen(path, "rb");
	struct cave_buf b;
	char chunk[65536];
	size_t n;
	jv v;
	if (!f)
		cave_die(CAVE_EX_USAGE, "cannot open '%s':", path);
	cave_buf_init(&b, CAVE_EVENT_MAX);
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		if (cave_buf_add(&b, chunk, n) < 0)
			cave_die(CAVE_EX_DATA, "'%s': larger than %zu bytes", path, (size_t)CAVE_EVENT_MAX);
	if (ferror(f))
		cave_die(CAVE_EX_IO, "cannot read '%s':", path);
	fclose(f);
	v = jv_parse_sized(b.data ? b.data : "", (int)b.len);
	cave_buf_free(&b);
	if (!jv_is_valid(v)) {
		jv m = jv_invalid_get_msg(v);
		cave_die(CAVE_EX_DATA, "'%s': %s", path,
			 jv_get_kind(m) == JV_KIND_STRING ? jv_string_value(m) : "not JSON");
	}
	if (jv_get_kind(v) != JV_KIND_ARRAY)
		cave_die(CAVE_EX_DATA, "'%s': %s must be a JSON array", path, what);
	return v;
}

static long parse_long(const char *s, const char *opt, long lo, long hi)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < lo || v > hi)
		cave_die(CAVE_EX_USAGE, "%s: expected a number from %ld to %ld, got '%s'", opt, lo, hi, s);
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "system", required_argument, NULL, 's' },
		{ "max-output-tokens", required_argument, NULL, 'o' },
		{ "api", required_argument, NULL, 'a' },
		{ "no-stream", no_argument, NULL, 'n' },
		{ "reasoning", required_argument, NULL, 'r' },
		{ "tools", required_argument, NULL, 't' },
		{ "messages", required_argument, NULL, 'M' },
		{ "agent", required_argument, NULL, 'g' },
		{ "id", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *model = DEFAULT_MODEL, *sys = NULL, *api = NULL, *reasoning = NULL;
	const char *agent = "adhoc", *id = "c1", *tools_file = NULL, *msgs_file = NULL;
	long max_out = 1024;
	int stream = 1, c;
	char run[37], span[17], digest[CAVE_SHA256_HEX];
	struct cave_buf prompt;
	jv messages, req, start, tools = jv_null();
	const char *slash;
	char provider[64];

	cave_set_prog("cave-request");
	while ((c = getopt_long(argc, argv, "m:s:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': model = optarg; break;
		case 's': sys = optarg; break;
		case 'o': max_out = parse_long(optarg, "--max-output-tokens", 1, 10000000); break;
		case 'a': api = optarg; break;
		case 'n': stream = 0; break;
		case 'r': reasoning = optarg; break;
		case 't': tools_file = optarg; break;
		case 'M': msgs_file = optarg; break;
		case 'g': agent = optarg; break;
		case 'i': id = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return CAVE_EX_USAGE;
		}
	}
	slash = strchr(model, '/');
	if (!slash || slash == model || !slash[1] || (size_t)(slash - model) >= sizeof provider)
		cave_die(CAVE_EX_USAGE, "--model: expected PROVIDER/MODEL, got '%s'", model);
	snprintf(provider, sizeof provider, "%.*s", (int)(slash - model), model);
	if (!api) {
		const char *target = provider;
		char inner[64];
		int a;
		if (strcmp(provider, "fixture") == 0) {
			const char *s2 = strchr(slash + 1, '/');
			if (!s2 || (size_t)(s2 - slash - 1) >= sizeof inner)
				cave_die(CAVE_EX_USAGE, "--model: a fixture model is fixture/PROVIDER/MODEL, got '%s'", model);
			snprintf(inner, sizeof inner, "%.*s", (int)(s2 - slash - 1), slash + 1);
			target = inner;
		}
		if ((a = cave_api_default(target)) < 0)
			cave_die(CAVE_EX_USAGE, "no wire protocol known for provider '%s'; name one with --api", target);
		api = cave_api_name((enum cave_api)a);
	} else if (cave_api_parse(api) < 0) {
		cave_die(CAVE_EX_USAGE, "--api: unknown protocol '%s'", api);
	}
	if (reasoning && strcmp(reasoning, "low") && strcmp(reasoning, "medium") && strcmp(reasoning, "high"))
		cave_die(CAVE_EX_USAGE, "--reasoning: expected low, medium or high, got '%s'", reasoning);

	cave_buf_init(&prompt, CAVE_EVENT_MAX / 2);
	for (int i = optind; i < argc; i++) {
		if (strcmp(argv[i], "-") == 0) {
			if (cave_buf_read_fd(&prompt, STDIN_FILENO) < 0)
				cave_die(errno == ENOBUFS ? CAVE_EX_DATA : CAVE_EX_IO, "<stdin>: %s",
					 errno == ENOBUFS ? "prompt too large" : strerror(errno));
		} else {
			if (prompt.len)
				cave_buf_addc(&prompt, ' ');
			if (cave_buf_adds(&prompt, argv[i]) < 0)
				cave_die(CAVE_EX_USAGE, "prompt too long");
		}
	}
	messages = msgs_file ? load_json_file(msgs_file, "--messages") : jv_array();
	if (prompt.len) {
		jv m = jv_object();
		m = jv_object_set(m, jv_string("role"), jv_string("user"));
		m = jv_object_set(m, jv_string("content"), jv_string_sized(prompt.data, (int)prompt.len));
		messages = jv_array_append(messages, m);
	}
	if (jv_array_length(jv_copy(messages)) == 0)
		cave_die(CAVE_EX_USAGE, "no prompt given; see 'cave request --help'");
	if (tools_file)
		tools = load_json_file(tools_file, "--tools");

	cave_uuid4(run);
	cave_span_id(span);
	{
		jv d = jv_dump_string(jv_copy(messages), 0);
		cave_sha256_hex(jv_string_value(d), (size_t)jv_string_length_bytes(jv_copy(d)), digest);
		jv_free(d);
	}
	start = cave_event_new("run.start", "cave-request");
	start = jv_object_set(start, jv_string("run"), jv_string(run));
	start = jv_object_set(start, jv_string("span"), jv_string(span));
	start = jv_object_set(start, jv_string("seq"), jv_number(1));
	start = jv_object_set(start, jv_string("agent"), jv_string(agent));
	start = jv_object_set(start, jv_string("input_digest"), jv_string(digest));

	req = cave_event_new("call.request", "cave-request");
	req = jv_object_set(req, jv_string("run"), jv_string(run));
	req = jv_object_set(req, jv_string("span"), jv_string(span));
	req = jv_object_set(req, jv_string("seq"), jv_number(2));
	req = jv_object_set(req, jv_string("id"), jv_string(id));
	req = jv_object_set(req, jv_string("provider"), jv_string(provider));
	req = jv_object_set(req, jv_string("model"), jv_string(slash + 1));
	req = jv_object_set(req, jv_string("api"), jv_string(api));
	if (sys)
		req = jv_object_set(req, jv_string("system"), jv_string(sys));
	req = jv_object_set(req, jv_string("messages"), messages);
	if (jv_get_kind(tools) == JV_KIND_ARRAY)
		req = jv_object_set(req, jv_string("tools"), tools);
	else
		jv_free(tools);
	req = jv_object_set(req, jv_string("max_output_tokens"), jv_number((double)max_out));
	req = jv_object_set(req, jv_string("reasoning"), reasoning ? jv_string(reasoning) : jv_null());
	req = jv_object_set(req, jv_string("stream"), stream ? jv_true() : jv_false());
	req = jv_object_set(req, jv_string("purpose"), jv_string("turn"));

	for (int i = 0; i < 2; i++) {
		size_t n;
		char *s = cave_event_dump(i ? req : start, &n);
		fwrite(s, 1, n, stdout);
		free(s);
	}
	cave_buf_free(&prompt);
	return cave_close_stdout();
}

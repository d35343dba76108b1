/* fuzz_yaml.c: libFuzzer target for the YAML loader and the agent
 * definition checks behind it. Whatever the bytes, the loader either gives
 * a value or an error naming a place (file:line:col), and an agent
 * definition built from a value loads or is refused with a message; nothing
 * may crash, leak or read out of bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cave_err e = { { 0 }, { 0 }, 0 };
	struct cave_agent a;
	jv v = cave_yaml_parse((const char *)data, size, "agent.yaml", &e);

	if (!jv_is_valid(v)) {
		/* a refusal always says where */
		if (strncmp(e.msg, "agent.yaml", 10) != 0)
			abort();
		jv_free(v);
		return 0;
	}
	memset(&e, 0, sizeof e);
	if (cave_agent_from_jv(v, "agent.yaml", NULL, &a, &e) == 0)
		cave_agent_free(&a);
	else if (!e.msg[0])
		abort(); /* a refusal without a message */
	jv_free(v);
	return 0;
}

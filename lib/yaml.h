/* yaml.h: YAML (libyaml) into jq's jv model. Plain scalars keep their text
 * as strings unless they are YAML 1.2 core numbers, booleans or null;
 * quoted scalars stay strings. Anchors, aliases and tags are refused. */
/* Under -Ilib this header's name shadows libyaml's <yaml.h>; lib/yaml.c
 * defines CAVE_YAML_IMPL and includes <yaml.h> to get both. */
#ifdef CAVE_YAML_IMPL
#include_next <yaml.h>
#endif
#ifndef CAVE_YAML_H
#define CAVE_YAML_H

#include <stddef.h>
#include <jv.h>

#include "msg.h"

/* Parses one YAML document. Returns the value, or jv_invalid with e set to
 * "name:LINE:COL: what" (name is used only for messages). */
jv cave_yaml_parse(const char *text, size_t len, const char *name, cave_err *e);
/* Reads and parses a file; same contract. */
jv cave_yaml_load(const char *path, cave_err *e);

#endif

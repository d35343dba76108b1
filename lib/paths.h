/* paths.h: where a program finds the project's data (catalog, fixtures,
 * schemas): beside its own bin/ directory in a source tree, or under
 * share/cave/ when installed. */
#ifndef CAVE_PATHS_H
#define CAVE_PATHS_H

#include <stddef.h>

/* Finds rel ("catalog/current.yaml") as <exe dir>/../rel, then
 * <exe dir>/../share/cave/rel. Returns 0 with the path in out, or -1. */
int cave_data_path(const char *rel, char *out, size_t n);

#endif

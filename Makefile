# cave: one non-recursive Makefile. Programs come from filters/, cave/ and
# sandbox/ (one .c each, linked against libcave); lib/ is libcave; unit tests
# are tests/unit/test_*.c. New files are picked up by wildcard.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR = $(PREFIX)/bin
DATADIR = $(PREFIX)/share/cave
# Where objects and programs go: the tests use build/ and bin/; lint builds
# beside them (build/lint-*), so it never disturbs the tree under test.
B ?= build
BIN ?= bin

CC ?= cc
CFLAGS ?= -O2 -g
WARN = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
       -Wformat=2 -Wno-format-nonliteral -Wpointer-arith -Wvla -Wundef
CPPFLAGS += -D_GNU_SOURCE -iquote lib
ALL_CFLAGS = -std=c17 $(WARN) $(CFLAGS) -MMD -MP
LDLIBS = -lcurl -ljq -lonig -lyaml -lcrypto -lseccomp -lm

LIB_SRC = $(sort $(wildcard lib/*.c))
LIB_OBJ = $(LIB_SRC:%.c=$(B)/%.o)
PROG_SRC = $(sort $(wildcard filters/*.c cave/*.c sandbox/*.c))
PROGS = $(patsubst %.c,$(BIN)/%,$(notdir $(PROG_SRC)))
UNIT_SRC = $(sort $(wildcard tests/unit/test_*.c))
UNITS = $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
FUZZ_SRC = $(sort $(wildcard tests/fuzz/fuzz_*.c))

all: $(PROGS) $(UNITS)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

$(B)/libcave.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

define prog_rule
$(BIN)/$(notdir $(basename $(1))): $(B)/$(basename $(1)).o $(B)/libcave.a
	@mkdir -p $(BIN)
	$$(CC) $$(ALL_CFLAGS) $$(LDFLAGS) -o $$@ $$< $(B)/libcave.a $$(LDLIBS)
endef
$(foreach s,$(PROG_SRC),$(eval $(call prog_rule,$(s))))

$(B)/tests/%: $(B)/tests/unit/%.o $(B)/libcave.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(B)/libcave.a $(LDLIBS)

deps:
	@scripts/deps

test: deps
	@$(MAKE) -s --no-print-directory all
	@tests/run

demo: deps
	@$(MAKE) -s --no-print-directory all
	@scripts/demo

bench: deps
	@$(MAKE) -s --no-print-directory all
	@tests/bench/run

# The whole suite again, built with AddressSanitizer and UBSan.
sanitize: deps
	@$(MAKE) --no-print-directory clean
	@$(MAKE) -s --no-print-directory all CC=clang \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  LDFLAGS="-fsanitize=address,undefined"
	@CAVE_SANITIZE=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 tests/run
	@$(MAKE) --no-print-directory clean

# Warnings are errors, and the banned functions stay out.
lint: deps
	@scripts/lint
	@$(MAKE) -s --no-print-directory all B=build/lint-gcc BIN=build/lint-gcc/bin CFLAGS="-O2 -g -Werror"
	@$(MAKE) -s --no-print-directory all B=build/lint-clang BIN=build/lint-clang/bin CC=clang CFLAGS="-O2 -g -Werror"

# Fuzz targets (libFuzzer, clang): make fuzz FUZZ_SECONDS=60
FUZZ_SECONDS ?= 20
fuzz: deps
	@scripts/fuzz $(FUZZ_SECONDS) $(FUZZ_SRC)

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DATADIR)/catalog $(DESTDIR)$(DATADIR)/fixtures $(DESTDIR)$(DATADIR)/schemas $(DESTDIR)$(DATADIR)/sandbox
	install -m 755 $(PROGS) $(DESTDIR)$(BINDIR)
	install -m 644 catalog/*.yaml $(DESTDIR)$(DATADIR)/catalog
	cp -R fixtures/. $(DESTDIR)$(DATADIR)/fixtures
	install -m 644 schemas/*.json $(DESTDIR)$(DATADIR)/schemas
	install -m 644 sandbox/*.policy $(DESTDIR)$(DATADIR)/sandbox

clean:
	rm -rf build bin

.PHONY: all deps test demo bench sanitize lint fuzz install clean
-include $(LIB_OBJ:.o=.d) $(PROG_SRC:%.c=$(B)/%.d) $(UNIT_SRC:%.c=$(B)/%.d)

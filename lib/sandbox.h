/* sandbox.h: running one tool contained. The text policies (seccomp rules,
 * filesystem view), the kernel probe, the environment allow-list, the
 * spawn of a tool under namespaces, Landlock, seccomp and rlimits, and the
 * capped capture of its output. Containment is the kernel's job: nothing
 * here checks what a tool does, it only asks the kernel to refuse it, and
 * fails closed when the kernel cannot. No function here exits. */
#ifndef CAVE_SANDBOX_H
#define CAVE_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "digest.h"
#include "msg.h"

/* ---- seccomp policy (lib/sandbox_policy.c) ------------------------------
 * One rule a line, like minijail's .policy files:
 *     # comment
 *     @default allow
 *     ptrace: kill
 *     mount: errno EPERM
 *     socket: errno EAFNOSUPPORT if arg0 == AF_PACKET
 *     socket: errno EPERM if arg1 & 0xf == SOCK_RAW
 *     clone: errno EPERM if arg0 & CLONE_NEWUSER
 * Actions: allow, kill (the whole tool process), errno NAME|NUMBER; an
 * errno action may be followed by "quiet" (a compatibility answer such as
 * clone3's ENOSYS, not reported as a denial).
 * Conditions: argN OP VALUE, joined by &&; OP one of == != < <= > >=, or
 * "& MASK [== VALUE]" (VALUE defaults to MASK); values are numbers or the
 * constant names the parser knows. */
#define CAVE_POLICY_MAX_RULES 256
#define CAVE_POLICY_MAX_ARGS 3

enum cave_pol_action { CAVE_POL_ALLOW, CAVE_POL_ERRNO, CAVE_POL_KILL };

struct cave_pol_arg {
	unsigned idx;   /* 0..5 */
	int op;         /* enum scmp_compare */
	uint64_t a, b;  /* datum, or mask and datum for masked compares */
};

struct cave_pol_rule {
	char text[96];  /* the rule as written, for results ("ptrace: kill") */
	int nr;         /* native syscall number */
	enum cave_pol_action action;
	int err;        /* errno for CAVE_POL_ERRNO */
	bool quiet;     /* "quiet": the kernel answers alone, not reported */
	unsigned nargs;
	struct cave_pol_arg args[CAVE_POLICY_MAX_ARGS];
};

struct cave_policy {
	char name[64];  /* file name without directory, for results */
	enum cave_pol_action dflt;
	int dflt_err;
	size_t n;
	struct cave_pol_rule rules[CAVE_POLICY_MAX_RULES];
	/* compiled classic BPF, ready for seccomp(2); NULL until compiled */
	void *bpf;      /* struct sock_filter[] */
	unsigned short bpf_len;
	bool notify;    /* denials go to the supervisor, which reports them */
};

/* Parses policy text; name is used in messages ("default.policy:3: ...").
 * Syscalls this architecture does not have are skipped. -1 with e set
 * (code "cave_sandbox_bad_policy"). */
int cave_policy_parse(struct cave_policy *p, const char *name,
		      const char *text, size_t len, cave_err *e);
/* Reads and parses a file. */
int cave_policy_load(struct cave_policy *p, const char *path, cave_err *e);
/* Reads a policy file of less than max bytes into text (initialised here;
 * the caller frees it). -1 with e set ("cave_sandbox_bad_policy"). */
int cave_policy_read(struct cave_buf *text, const char *path, size_t max, cave_err *e);
/* Compiles p to BPF once, so that each spawn only loads it. With notify,
 * every deny rule hands the call to the supervisor (SECCOMP_RET_USER_NOTIF)
 * so the result can name the rule; without, the kernel acts directly. */
int cave_policy_compile(struct cave_policy *p, bool notify, cave_err *e);
void cave_policy_free(struct cave_policy *p);
/* The first rule matching syscall nr with args, or -1. */
int cave_policy_match(const struct cave_policy *p, int nr,
		      const uint64_t args[6]);

/* ---- filesystem view (lib/sandbox_policy.c) -----------------------------
 * fs.policy: "read PATH" (read and execute beneath PATH), "rw PATH" (read
 * and write: devices such as /dev/null), "hide PATH" (carved out of a
 * read or rw tree above it). Missing paths are skipped. Expanded once into
 * a flat list of paths that never covers a hidden one. */
#define CAVE_FS_MAX 1024
struct cave_fs_entry {
	char *path;
	bool write;
};
struct cave_fs_view {
	size_t n;
	struct cave_fs_entry e[CAVE_FS_MAX];
};
int cave_fs_view_load(struct cave_fs_view *v, const char *path, cave_err *e);
int cave_fs_view_parse(struct cave_fs_view *v, const char *name,
		       const char *text, size_t len, cave_err *e);
void cave_fs_view_free(struct cave_fs_view *v);

/* ---- Landlock (lib/landlock.c) ------------------------------------------ */
/* The kernel's Landlock ABI version, 0 when unsupported or disabled. */
int cave_landlock_abi(void);
/* Builds and enforces a ruleset on the calling thread (no_new_privs must be
 * set): read (and execute) beneath every entry of view and beneath each
 * extra read path, write beneath view's rw entries and each extra write
 * path; no TCP bind, and no TCP connect unless tcp_connect (ABI >= 4); no
 * signals or abstract sockets out of the domain (ABI >= 6). Returns 0, or
 * -1 with *what naming the step that failed (errno set). Only
 * async-signal-safe calls: it runs in a freshly cloned child. */
int cave_landlock_enforce(int abi, const struct cave_fs_view *view,
			  const char *const *extra_read,
			  const char *const *extra_write, bool tcp_connect,
			  const char **what);

/* ---- kernel probe (lib/sandbox_probe.c) --------------------------------- */
struct cave_kernel {
	char release[65];
	int landlock_abi;
	bool userns;        /* an unprivileged-style user namespace can be made */
	bool seccomp;       /* seccomp filters can be loaded */
	bool seccomp_notify;/* user notification works (rule names in results) */
	bool pidfd;
	char missing[256];  /* what required mode lacks, "" when nothing */
};
/* Probes what the kernel offers; forks short-lived children to try. */
void cave_kernel_probe(struct cave_kernel *k);

/* ---- user-mode network (lib/sandbox_net.c) -----------------------------
 * A tool that declares network: true gets, in required mode, a network of
 * its own through slirp4netns run on the host side against the tool's
 * network namespace: tap0 10.0.2.100/24, gateway 10.0.2.2, DNS 10.0.2.3,
 * and never the host's loopback (--disable-host-loopback). */
struct cave_net {
	char slirp[4096];   /* the slirp4netns found, "" when none */
	bool tun;           /* /dev/net/tun is a character device we may open */
	char missing[256];  /* what network: true lacks here, "" when nothing */
};
/* Finds name (a path when it holds a '/', else searched in PATH) and
 * checks /dev/net/tun. */
void cave_net_probe(struct cave_net *n, const char *name);
/* Forks slirp4netns for the network namespace of target (joined through
 * its user namespace: target must stay dumpable until slirp4netns reports
 * ready) with exit_rd as its --exit-fd and ready_wr as its --ready-fd;
 * its stderr goes to a new capped log in *log_fd (the caller closes it).
 * Returns its pid, or -1 with e set. */
pid_t cave_net_start(const char *slirp, pid_t target, bool host_loopback, int exit_rd,
		     int ready_wr, int *log_fd, cave_err *e);
/* The last line of that log, printable, into buf ("" when none). */
void cave_net_log_tail(int log_fd, char *buf, size_t n);

/* ---- pids cgroup (lib/sandbox_cgroup.c) -------------------------------- */
/* Makes a child pids cgroup of this process's own with pids.max set; the
 * path goes to path. -1 when no pids controller is writable here. */
int cave_cgroup_make(long pids_max, char *path, size_t n);
int cave_cgroup_join(const char *path, pid_t pid);
/* How many forks the group's pids.max refused so far (0 when unknown). */
long cave_cgroup_pids_refused(const char *path);
/* Removes the group once its members are gone (waits a little for them). */
void cave_cgroup_remove(const char *path);

/* ---- environment (lib/sandbox_env.c) ------------------------------------ */
/* True for names that must never reach a tool: *_API_KEY, *TOKEN*,
 * *SECRET*, *PASSWORD*, CAVE_*, AWS_*, credential paths. */
bool cave_env_is_secret(const char *name);
/* Overwrites the values of secret variables in this process's own
 * environment block in place and unsets them, so that no child image (and
 * no /proc/PID/environ) carries them. */
void cave_env_scrub_self(void);
/* Builds the allow-listed environment for a tool in *envp (NULL-terminated,
 * strings in *store; free with cave_env_free): PATH, HOME, TMPDIR, LANG,
 * LC_*, TERM, TZ. home and tmp may be NULL to keep the caller's. */
int cave_env_build(char ***envp, const char *home, const char *tmp);
void cave_env_free(char **envp);

/* ---- spawning (lib/sandbox_spawn.c) ------------------------------------- */
enum cave_sbx_mode { CAVE_SBX_REQUIRED, CAVE_SBX_HOST };

struct cave_sbx_limits {
	long cpu_sec;       /* RLIMIT_CPU */
	long mem_mb;        /* RLIMIT_AS */
	long fsize_mb;      /* RLIMIT_FSIZE */
	long nofile;        /* RLIMIT_NOFILE */
	long nproc;         /* RLIMIT_NPROC */
	long tmp_mb;        /* size of the private HOME/TMPDIR tmpfs */
};
void cave_sbx_limits_default(struct cave_sbx_limits *l);

struct cave_sbx_spec {
	enum cave_sbx_mode mode;
	const char *command;    /* resolved absolute path */
	const char *workspace;  /* resolved absolute directory */
	bool write;             /* effect: write */
	bool network;
	bool host_loopback;     /* network reaches the host's loopback (10.0.2.2) */
	const char *input;      /* stdin bytes */
	size_t input_len;
	struct cave_sbx_limits lim;
	const struct cave_policy *policy;  /* required mode */
	const struct cave_fs_view *view;   /* required mode */
	int landlock_abi;
	const char *scratch_parent; /* where the private HOME/TMPDIR is made */
	const char *slirp;      /* slirp4netns, for network in required mode */
};

/* What the supervisor inside the sandbox tells the parent at its end. */
#define CAVE_SBX_MAX_DENIALS 8
struct cave_sbx_report {
	int magic;
	int started;        /* the tool was executed */
	int status;         /* its wait status, when started */
	int err;            /* errno of the failed setup step or exec */
	char what[96];      /* the setup step that failed, "" when none */
	int ndenials;
	struct {
		int rule;       /* index into the policy, -1 unknown */
		int nr;
		unsigned count;
		int killed;
	} denials[CAVE_SBX_MAX_DENIALS];
};
#define CAVE_SBX_REPORT_MAGIC 0x63617665

/* A running tool as the parent sees it. */
struct cave_sbx_proc {
	pid_t pid;          /* the supervisor (pid 1 of the tool's namespaces) */
	int out_fd;         /* the tool's stdout and stderr, read end */
	int report_fd;      /* the supervisor's report, read end */
	char scratch[256];  /* host-side mount point of the private tmpfs */
	char cgroup[1280];  /* the pids cgroup, "" when none */
	bool host;
	pid_t net_pid;      /* slirp4netns, 0 when the tool has no network */
	int net_log;        /* its stderr (cave_net_log_tail), -1 when none */
};

/* Starts the tool. Returns 0, or -1 with e set when the sandbox could not
 * be set up (code "cave_sandbox_unavailable" naming what is missing). The
 * caller polls out_fd and report_fd, then calls cave_sbx_finish. */
int cave_sbx_spawn(const struct cave_sbx_spec *s, struct cave_sbx_proc *p,
		   cave_err *e);
/* Kills the whole tool tree (the namespace, or the process group in host
 * mode). Safe to call more than once. */
void cave_sbx_kill(struct cave_sbx_proc *p);
/* Reaps the supervisor, kills slirp4netns, removes the scratch mount point
 * and closes what is left open; *status is the supervisor's own wait
 * status. A slirp4netns not gone yet is left for cave_sbx_reap. */
void cave_sbx_finish(struct cave_sbx_proc *p, int *status);
/* Reaps the slirp4netns processes cave_sbx_finish left; with wait, blocks
 * until they are all gone (call it before exiting). */
void cave_sbx_reap(bool wait);

/* Resolves the workspace (realpath, must be a directory, never "/") and
 * the command (absolute, or relative to the workspace and then never out
 * of it). Returns 0, or -1 with e set (code "cave_sandbox_bad_path"). */
int cave_sbx_resolve(const char *workspace, const char *command,
		     char ws_out[4096], char cmd_out[4096], cave_err *e);

/* ---- output capture (lib/sandbox_output.c) ------------------------------ */
struct cave_capture {
	size_t inline_max;  /* bytes kept inline in the result */
	size_t keep_max;    /* bytes kept in the store past inline_max */
	char *inl;          /* the first inline_max bytes */
	size_t inl_len;
	uint64_t size;      /* every byte the tool wrote */
	struct cave_sha256 *sha;
	int blob_fd;        /* temp file in the store, -1 until needed */
	char blob_tmp[4096];
	const char *store;  /* directory of blobs; NULL: none kept */
	bool keep_failed;
};
void cave_capture_init(struct cave_capture *c, size_t inline_max,
		       size_t keep_max, const char *store);
/* Takes the next bytes the tool wrote. Never fails: what cannot be kept is
 * still counted and digested. */
void cave_capture_add(struct cave_capture *c, const char *p, size_t n);
/* Finishes: digest (64 hex) of everything, and whether the whole output is
 * in the store as <store>/<digest>. */
void cave_capture_finish(struct cave_capture *c, char digest[65],
			 bool *stored);
void cave_capture_free(struct cave_capture *c);

#endif

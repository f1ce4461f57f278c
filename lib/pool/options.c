/* SPDX-License-Identifier: MIT */
/*
 * options.c: every option a pool takes, checked and completed from the
 * environment in one place (as mimalloc's options.c): gpb_pool_create
 * calls gpb__options_pool once, and the framework entry points parse
 * their GPB_TORCH_* settings with the same parsers (gpb__options_size,
 * gpb__options_torch below).
 *
 * The environment of a pool made without GPB_CFG_NO_ENV:
 *   GPB_PUBLISH=NAME    publish live (the k-th pool of a process: NAME.k)
 *   GPB_TRACE=PATH      record a trace (the k-th pool: .k before the first
 *                       dot of the file name); a FIFO or other special
 *                       file other than a character device is refused
 *   GPB_ARENAS=N        arenas, when the program asked for 1
 *   GPB_CALLSITES=DEPTH record call sites, 0 to 64 frames
 *   GPB_PLAN=FILE       follow a placement plan; a plan implies best fit
 *                       without arenas, which the pool then takes (and
 *                       says so once on standard error)
 */
#include "pool/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Pools that took a name or a trace path from the environment so far. */
static _Atomic unsigned options_env_count;
/* Whether the note that GPB_PLAN changed a pool's policy was printed. */
static atomic_flag options_plan_said = ATOMIC_FLAG_INIT;

/* PATH for the k-th pool: .k before the first dot of the file name, so
 * the extensions (.gz: compressed) are kept; k = 0: PATH itself. */
static int options_env_path(const char *path, unsigned k, char *out,
                            size_t n) {
  if (k == 0) return snprintf(out, n, "%s", path) >= (int)n;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const char *dot = strchr(base, '.');
  if (!dot || dot == base) return snprintf(out, n, "%s.%u", path, k) >= (int)n;
  int m = snprintf(out, n, "%.*s.%u%s", (int)(dot - path), path, k, dot);
  return m < 0 || (size_t)m >= n;
}

int gpb__options_output(const char *var, const char *path) {
  struct stat st;
  if (strcmp(path, "-") && stat(path, &st) == 0 && !S_ISREG(st.st_mode) &&
      !S_ISCHR(st.st_mode))
    return gpb__fail(GPB_EINVAL, "%s%s%s: not a regular file (a FIFO would "
                     "block the program)", var ? var : "", var ? "=" : "",
                     path);
  return 0;
}

/* The checks no environment changes. */
static int options_check(const gpb_config_t *cfg) {
  if (cfg->min_block < 16 || (cfg->min_block & (cfg->min_block - 1)))
    return gpb__fail(GPB_EINVAL, "min_block %zu is not a power of two >= 16",
                     cfg->min_block);
  if (cfg->pool_size < cfg->min_block)
    return gpb__fail(GPB_EINVAL, "pool_size %zu is smaller than min_block %zu",
                     cfg->pool_size, cfg->min_block);
  if ((unsigned)cfg->policy >= GPB_NUM_POLICIES)
    return gpb__fail(GPB_EINVAL, "unknown policy %d", (int)cfg->policy);
  if ((unsigned)cfg->backend > GPB_BACKEND_VIRTUAL)
    return gpb__fail(GPB_EINVAL, "unknown backend %d", (int)cfg->backend);
  return 0;
}

/* GPB_PUBLISH and GPB_TRACE: one environment serves every pool of the
 * process, the first taking NAME and PATH as they are. */
static int options_outputs(gpb_config_t *cfg, gpb__options_t *o) {
  const char *pe = getenv("GPB_PUBLISH"), *te = getenv("GPB_TRACE");
  int want_name = !cfg->name && pe && *pe;
  int want_path = !cfg->trace_path && te && *te;
  unsigned k = want_name || want_path
                   ? atomic_fetch_add(&options_env_count, 1) : 0;
  if (want_name) {
    int n = k ? snprintf(o->name, sizeof o->name, "%s.%u", pe, k)
              : snprintf(o->name, sizeof o->name, "%s", pe);
    if (n < 0 || (size_t)n >= sizeof o->name)
      return gpb__fail(GPB_EINVAL, "GPB_PUBLISH=%s: pool %u's name %s.%u "
                       "is too long", pe, k, pe, k);
    cfg->name = o->name;
  }
  if (want_path) {
    if (options_env_path(te, k, o->trace, sizeof o->trace))
      return gpb__fail(GPB_EINVAL, "GPB_TRACE=%s is too long", te);
    int rc = gpb__options_output("GPB_TRACE", o->trace);
    if (rc) return rc;
    cfg->trace_path = o->trace;
    o->trace_from_env = 1;
  }
  return 0;
}

/* GPB_PLAN: the plan implies best fit without arenas. */
static void options_plan(gpb_config_t *cfg, gpb__options_t *o) {
  const char *pf = getenv("GPB_PLAN");
  if (!pf || !*pf) return;
  o->plan = pf;
  if (cfg->policy == GPB_POLICY_BESTFIT && cfg->arenas == 1) return;
  if (!atomic_flag_test_and_set(&options_plan_said))
    fprintf(stderr, "gpubuddy: GPB_PLAN=%s: following it with policy bestfit "
            "and no arenas (the program asked for %s, %u arena%s)\n", pf,
            gpb_policy_name(cfg->policy), cfg->arenas,
            cfg->arenas == 1 ? "" : "s");
  cfg->policy = GPB_POLICY_BESTFIT;
  cfg->arenas = 1;
}

int gpb__options_pool(const gpb_config_t *in, gpb_config_t *cfg,
                      gpb__options_t *o) {
  memset(o, 0, sizeof *o);
  *cfg = *in;
  int rc = options_check(cfg);
  if (rc) return rc;
  if (!(cfg->flags & GPB_CFG_NO_ENV)) {
    if ((rc = options_outputs(cfg, o))) return rc;
    const char *e = getenv("GPB_ARENAS");
    if (cfg->arenas == 1 && e && *e &&
        (rc = gpb__parse_arenas("GPB_ARENAS", e, &cfg->arenas)))
      return rc;
    /* The environment asks for arenas where they can be had; only a
     * program that asks itself gets an error for a VMM pool. */
    if ((cfg->flags & GPB_CFG_VMM) && in->arenas == 1) cfg->arenas = 1;
    e = getenv("GPB_CALLSITES");
    uint32_t depth;
    if (!(cfg->flags & GPB_CFG_CALLSITES) && e && *e) {
      if ((rc = gpb__parse_env_u32("GPB_CALLSITES", e, GPB_SITE_DEPTH_MAX,
                                   "0 (off) to 64 frames", &depth)))
        return rc;
      if (depth) cfg->flags |= GPB_CFG_CALLSITES_DEPTH(depth);
    }
    options_plan(cfg, o);
  }
  if (cfg->arenas > 64)
    return gpb__fail(GPB_EINVAL, "arenas %u: at most 64", cfg->arenas);
  if (cfg->name &&
      (strlen(cfg->name) == 0 || strlen(cfg->name) >= GPB_NAME_MAX))
    return gpb__fail(GPB_EINVAL, "name must be 1 to %d characters",
                     GPB_NAME_MAX - 1);
  return 0;
}

int gpb__options_size(const char *var, const char *s, double *share,
                      size_t *bytes) {
  size_t len = s ? strlen(s) : 0;
  *share = 0;
  *bytes = 0;
  if (len && s[len - 1] == '%') {
    char *end;
    double pct = strtod(s, &end);
    if (end != s + len - 1 || !(pct > 0 && pct <= 100))
      return gpb__fail(GPB_EINVAL, "%s=%s: expected a size or a percentage "
                       "in (0, 100]", var, s);
    *share = pct / 100.0;
    return 0;
  }
  int rc = gpb_size_parse(s ? s : "", bytes);
  if (rc || *bytes == 0)
    return gpb__fail(GPB_EINVAL, "%s=%s: expected a size or a percentage "
                     "in (0, 100]", var, s ? s : "");
  return 0;
}

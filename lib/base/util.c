/* SPDX-License-Identifier: MIT */
/*
 * util.c: configuration defaults, name tables and small parsers shared by
 * the library and the command-line tools.
 */
#include "base/base.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

void gpb_config_init(gpb_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->backend = GPB_BACKEND_AUTO;
  cfg->pool_size = (size_t)256 << 20;
  cfg->min_block = 256; /* cudaMalloc's alignment */
  cfg->policy = GPB_POLICY_BUDDY;
  cfg->arenas = 1;
}

static const char *const backend_names[] = {"auto", "device", "pinned", "host",
                                             "virtual"};
static const char *const policy_names[] = {"buddy", "trim", "bestfit"};

const char *gpb_backend_name(gpb_backend_t b) {
  return (unsigned)b < 5 ? backend_names[b] : "?";
}

const char *gpb_policy_name(gpb_policy_t p) {
  return (unsigned)p < GPB_NUM_POLICIES ? policy_names[p] : "?";
}

int gpb_backend_parse(const char *s, gpb_backend_t *out) {
  for (int i = 0; s && i < 5; i++)
    if (strcasecmp(s, backend_names[i]) == 0) {
      *out = (gpb_backend_t)i;
      return 0;
    }
  return gpb__fail(GPB_EINVAL, "unknown backend '%s' (auto, device, pinned, "
                   "host, virtual)", s ? s : "");
}

int gpb_policy_parse(const char *s, gpb_policy_t *out) {
  for (int i = 0; s && i < GPB_NUM_POLICIES; i++)
    if (strcasecmp(s, policy_names[i]) == 0) {
      *out = (gpb_policy_t)i;
      return 0;
    }
  return gpb__fail(GPB_EINVAL, "unknown policy '%s' (buddy, trim, bestfit)", s ? s : "");
}

int gpb_size_parse(const char *s, size_t *out) {
  if (!s || !*s) return gpb__fail(GPB_EINVAL, "empty size");
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (errno || end == s || !(v >= 0) || isinf(v))
    return gpb__fail(GPB_EINVAL, "bad size '%s'", s);
  while (isspace((unsigned char)*end)) end++;
  double mult = 1;
  switch (toupper((unsigned char)*end)) {
  case 'K': mult = 1024.0; end++; break;
  case 'M': mult = 1024.0 * 1024; end++; break;
  case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
  case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
  default: break;
  }
  if (mult > 1 && (*end == 'i' || *end == 'I')) end++;
  if (*end == 'b' || *end == 'B') end++;
  if (*end) return gpb__fail(GPB_EINVAL, "bad size suffix in '%s'", s);
  double bytes = v * mult;
  if (bytes > 1.8e19 || bytes != floor(bytes))
    return gpb__fail(GPB_EINVAL, "size '%s' is not a whole number of bytes", s);
  *out = (size_t)bytes;
  return 0;
}

int gpb_size_format(uint64_t bytes, char *buf, size_t n) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB",
                                     "EiB"};
  if (!buf && n) return gpb__fail(GPB_EINVAL, "buf is NULL");
  char tmp[GPB_SIZE_FORMAT_MAX];
  int len;
  if (bytes < 1024) {
    len = snprintf(tmp, sizeof tmp, "%" PRIu64 " B", bytes);
  } else {
    double d = (double)bytes;
    int u = 0;
    while (d >= 1024 && u < 6) {
      d /= 1024;
      u++;
    }
    len = snprintf(tmp, sizeof tmp, "%.1f %s", d, unit[u]);
    /* 1048575 B is 1023.999 KiB, which one decimal shows as 1024.0. */
    if (u < 6 && strncmp(tmp, "1024.0", 6) == 0)
      len = snprintf(tmp, sizeof tmp, "%.1f %s", d / 1024, unit[u + 1]);
  }
  if (n) {
    size_t k = (size_t)len < n ? (size_t)len : n - 1;
    memcpy(buf, tmp, k);
    buf[k] = '\0';
  }
  return len;
}

const char *gpb_event_type_name(int type) {
  switch (type) {
  case GPB_EV_ALLOC: return "alloc";
  case GPB_EV_FREE: return "free";
  case GPB_EV_SPLIT: return "split";
  case GPB_EV_MERGE: return "merge";
  case GPB_EV_FAIL: return "fail";
  default: return "?";
  }
}

const char *gpb_version(void) { return GPB_VERSION_STRING; }

int32_t gpb__env_rank(void) {
  const char *s = getenv("RANK");
  if (!s || !isdigit((unsigned char)*s)) return -1; /* no sign, no space */
  char *end;
  errno = 0;
  unsigned long r = strtoul(s, &end, 10);
  return errno || *end || r > INT32_MAX ? -1 : (int32_t)r;
}

int gpb__parse_env_u32(const char *var, const char *s, uint32_t max,
                       const char *want, uint32_t *out) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno || end == s || *end || v > max)
    return gpb__fail(GPB_EINVAL, "%s=%s: want %s", var, s, want);
  *out = (uint32_t)v;
  return 0;
}

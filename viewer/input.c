/* SPDX-License-Identifier: MIT */
/*
 * input.c: what keys and the mouse do. main.c turns SDL events into these
 * calls, so the behaviour can be driven from tests without a display.
 */
#include "view.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const vinput_keys_help =
    "Keys\n"
    "space        play / pause (live: freeze the view, not the program)\n"
    "right  .     step one op (replay)\n"
    "left   ,     step back one op (replay)\n"
    "+  -         faster / slower      0  as fast as possible\n"
    "Home  End    start / end of the trace\n"
    "click timeline    seek (replay); a red mark: explain that failure\n"
    "o            explain a failed allocation    [  ]  previous / next\n"
    "wheel  z  x  zoom in / out        f  fit the whole pool\n"
    "wheel on the timeline: zoom in time   <  >  pan it\n"
    "up down PgUp PgDn  drag    scroll\n"
    "c            cycle colours: state, order, tag, age, site (1-5)\n"
    "s            side panel: free blocks per order / live bytes by site\n"
    "t            block map / buddy tree (one row per order)\n"
    "a            allocations over time, one band each / block map\n"
    "/            find an address or offset (0x.., 123, 4K);\n"
    "             a replay also finds the trace's own addresses\n"
    "click map    select a block (hover: its call site)   Esc  clear\n"
    "j  k         scroll the hover's call stack (your frames first)\n"
    "p            save a PNG screenshot\n"
    "grid of pools (--all, --connect A,B): click one to watch it\n"
    "g            back to the grid (Esc too, with nothing selected)\n"
    "h  ?         this help            q  quit\n"
    "Figures count free buddies merged, as a request finds them.\n"
    "UNUSABLE x for S: share of the free bytes in blocks smaller than S,\n"
    "the block of the largest request seen (0: any free block takes it,\n"
    "1: none does, and such a request fails now)";

/* Parses "0x1f00", "4096", "64K", "1.5MiB": hex or gpb_size_parse. */
int vinput_parse_where(const char *s, uint64_t *out) {
  while (*s == ' ') s++;
  if ((s[0] == '0') && (s[1] == 'x' || s[1] == 'X')) {
    /* Hex digits only: strtoull would take "0x-1" as 2^64-1, and a value
     * past 64 bits as ULLONG_MAX. */
    if (!isxdigit((unsigned char)s[2])) return GPB_EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s + 2, &end, 16);
    if (errno || *end) return GPB_EINVAL;
    *out = v;
    return 0;
  }
  size_t v;
  int rc = gpb_size_parse(s, &v);
  if (rc == 0) *out = v;
  return rc;
}

static void input_find(vapp_t *a) {
  uint64_t v;
  if (vinput_parse_where(a->search, &v)) {
    vapp_message(a, "not an address or offset: %s", a->search);
    return;
  }
  uint64_t base = (uint64_t)(uintptr_t)a->info.base;
  uint64_t off = v;
  /* A value inside the reservation is an address; otherwise an offset. */
  if (base && v >= base && v - base < a->info.managed_size) off = v - base;
  /* A replay also knows the traced program's addresses (0x7fb4...: the
   * ids of PyTorch and RMM traces): a live allocation's id, or a byte
   * inside its request when the value is no offset. */
  uint64_t toff, tid;
  if (a->kind == VSRC_REPLAY && vreplay_find_trace(a->rp, v, &toff, &tid) == 0 &&
      (tid == v || off >= a->info.managed_size)) {
    gpb_block_info_t b;
    if (gpb_model_lookup(a->model, toff, &b) == 0) {
      a->have_sel = 1;
      a->sel_off = toff;
      vmap_center(&a->map, b.offset, b.size);
      vapp_message(a, "trace address 0x%llx: allocation id 0x%llx, block of "
                   "order %u at offset 0x%llx", (unsigned long long)v,
                   (unsigned long long)tid, b.order,
                   (unsigned long long)b.offset);
      return;
    }
  }
  if (off >= a->info.managed_size) {
    vapp_message(a, "0x%llx is past the end of the pool",
                 (unsigned long long)v);
    return;
  }
  gpb_block_info_t b;
  if (gpb_model_lookup(a->model, off, &b)) {
    vapp_message(a, "no block at offset %llu", (unsigned long long)off);
    return;
  }
  a->have_sel = 1;
  a->sel_off = off;
  vmap_center(&a->map, b.offset, b.size);
  vapp_message(a, "offset 0x%llx: %s block of order %u at 0x%llx",
               (unsigned long long)off, b.used ? "used" : "free", b.order,
               (unsigned long long)b.offset);
}

static void input_step(vapp_t *a, int dir) {
  if (a->kind != VSRC_REPLAY) return;
  a->paused = 1;
  uint64_t pos = vapp_pos(a);
  if (dir < 0 && pos == 0) return;
  a->seek_to = dir > 0 ? pos + 1 : pos - 1;
}

static void input_zoom_center(vapp_t *a, int steps) {
  uint64_t cell;
  int x = a->map_x + a->map_w / 2, y = a->map_y + a->map_h / 2;
  uint64_t off = vframe_offset_at(a, x, y, &cell);
  if (off == UINT64_MAX) off = a->map.start, cell = 0;
  vmap_zoom(&a->map, steps, off, cell);
}

/* The search prompt's keys: Return finds, Esc closes, Backspace. */
static void input_search_key(vapp_t *a, int key) {
  size_t n = strlen(a->search);
  if (key == VKEY_ENTER) {
    a->searching = 0;
    input_find(a);
  } else if (key == VKEY_ESC) {
    a->searching = 0;
  } else if (key == VKEY_BACKSPACE && n) {
    a->search[n - 1] = 0;
  }
}

/* The map's keys: zoom, scroll, colours, layout. 1 when it was one. */
static int input_map_key(vapp_t *a, int key) {
  int64_t page = a->map.layout == VLAYOUT_TREE ? 4 : a->map.rows;
  switch (key) {
  case 'z': input_zoom_center(a, 1); return 1;
  case 'x': input_zoom_center(a, -1); return 1;
  case 'f': vmap_fit(&a->map); return 1;
  case VKEY_UP: vmap_scroll(&a->map, -8); return 1;
  case VKEY_DOWN: vmap_scroll(&a->map, 8); return 1;
  case VKEY_PGUP: vmap_scroll(&a->map, -page); return 1;
  case VKEY_PGDN: vmap_scroll(&a->map, page); return 1;
  case 'c':
    vmap_set_color(&a->map, (vcolor_mode_t)((a->map.color + 1) % VCOLOR_COUNT));
    return 1;
  case '1': case '2': case '3': case '4': case '5':
    vmap_set_color(&a->map, (vcolor_mode_t)(key - '1'));
    return 1;
  case 't':
    vmap_set_layout(&a->map, a->map.layout == VLAYOUT_TREE ? VLAYOUT_LINEAR
                                                          : VLAYOUT_TREE);
    return 1;
  default:
    return 0;
  }
}

int vinput_key(vapp_t *a, int key) {
  if (a->searching) {
    input_search_key(a, key);
    return 0;
  }
  if (a->show_help && key != 'h' && key != '?') {
    a->show_help = 0;
    if (key == VKEY_ESC) return 0;
  }
  if (input_map_key(a, key)) return 0;
  switch (key) {
  case 'q':
    return 1;
  case VKEY_ESC: /* clears; only q quits, so Esc never loses a session */
    if (a->oom.sel >= 0) voom_key(a, key); /* the panel first */
    else a->have_sel = 0;
    break;
  case 'o':
  case '[':
  case ']':
    voom_key(a, key);
    break;
  case 's':
    a->side_sites = !a->side_sites;
    break;
  case 'a':
    a->show_bands = !a->show_bands;
    break;
  case 'j':
    a->hover_skip++;
    break;
  case 'k':
    if (a->hover_skip > 0) a->hover_skip--;
    break;
  case '<':
  case '>':
    vtl_pan(a, key == '<' ? -1 : 1);
    break;
  case VKEY_SPACE:
    a->paused = !a->paused;
    break;
  case VKEY_RIGHT:
  case '.':
    input_step(a, 1);
    break;
  case VKEY_LEFT:
  case ',':
    input_step(a, -1);
    break;
  case '+':
  case '=':
    if (a->speed <= 0) break;
    a->speed *= 2;
    if (a->speed > 1e9) a->speed = 0;
    break;
  case '-':
    if (a->speed <= 0) a->speed = 1e6;
    else if (a->speed > 1) a->speed /= 2;
    break;
  case '0':
    a->speed = 0;
    break;
  case VKEY_HOME:
    if (a->kind == VSRC_REPLAY) a->seek_to = 0;
    break;
  case VKEY_END:
    if (a->kind == VSRC_REPLAY) a->seek_to = a->total_ops ? a->total_ops : UINT64_MAX - 1;
    break;
  case '/':
    a->searching = 1;
    a->search[0] = 0;
    break;
  case 'p':
    a->want_shot = 1;
    break;
  case 'h':
  case '?':
    a->show_help = !a->show_help;
    break;
  default:
    break;
  }
  return 0;
}

void vinput_text(vapp_t *a, const char *utf8) {
  if (!a->searching) return;
  size_t n = strlen(a->search);
  /* The '/' that opened the prompt also arrives as text (SDL sends both
   * the key and its text): a search never starts with it. */
  if (n == 0 && utf8[0] == '/') utf8++;
  for (const char *p = utf8; *p && n + 1 < sizeof a->search; p++)
    if (*p > ' ' && *p < 127) a->search[n++] = *p;
  a->search[n] = 0;
}

void vinput_wheel(vapp_t *a, int x, int y, int dy) {
  if (a->tl_h > 0 && x >= a->tl_x && x < a->tl_x + a->tl_w &&
      y >= a->tlb_y && y < a->tlb_y + a->tlb_h) {
    vtl_zoom(a, x, dy > 0 ? 1 : -1);
    return;
  }
  uint64_t cell;
  uint64_t off = vframe_offset_at(a, x, y, &cell);
  if (off == UINT64_MAX) return;
  vmap_zoom(&a->map, dy > 0 ? 1 : -1, off, cell);
}

void vinput_button(vapp_t *a, int x, int y, int down) {
  if (!down) {
    a->dragging = 0;
    return;
  }
  if (vtl_click(a, x, y)) return;
  uint64_t off = vframe_offset_at(a, x, y, NULL);
  if (off != UINT64_MAX) {
    a->have_sel = 1;
    a->sel_off = off;
    a->dragging = 1;
    a->drag_y = y;
  }
}

void vinput_motion(vapp_t *a, int x, int y, int buttons) {
  a->mouse_x = x;
  a->mouse_y = y;
  a->mouse_in = x >= a->map_x && x < a->map_x + a->map_w && y >= a->map_y &&
                y < a->map_y + a->map_h;
  a->tl_mouse = x >= a->tl_x && x < a->tl_x + a->tl_w && y >= a->tl_y &&
                y < a->tl_y + a->tl_h;
  if (!buttons) {
    a->dragging = 0;
    return;
  }
  if (a->dragging == 2 && x >= a->tl_x && x < a->tl_x + a->tl_w) {
    a->seek_to = vtl_x_at(a, x);
  } else if (a->dragging == 1) {
    int step = a->cell_px * 4;
    int d = (a->drag_y - y) / step;
    if (d) {
      vmap_scroll(&a->map, a->map.layout == VLAYOUT_TREE ? d : d * 4);
      a->drag_y -= d * step;
    }
  }
}

void vinput_find(vapp_t *a, const char *where) {
  snprintf(a->search, sizeof a->search, "%s", where);
  a->searching = 1;
  vinput_key(a, VKEY_ENTER);
}

/* SPDX-License-Identifier: MIT */
/*
 * window.c: the SDL2 window. It only uploads the frame buffer that
 * vframe_draw fills to a streaming texture and turns SDL events into
 * input.c's keys and mouse calls, so every other mode builds without SDL2.
 * The window is sized in the renderer's output pixels, so HiDPI screens
 * get full resolution and a UI scale of 2; text doubles again in a big
 * window (vframe_auto_scale). While nothing can change (a
 * paused or finished replay, a paused or closed live view) it sleeps
 * until an event, redrawing a few times a second at most.
 *
 * GPB_VIEW_TEST_QUIT_MS=N (tests): quit after N ms and say on stderr how
 * many frames were drawn.
 */
#include "view.h"
#include "json.h"

#include <SDL.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int sdl_key(const SDL_Keysym *k) {
  switch (k->sym) {
  case SDLK_SPACE: return VKEY_SPACE;
  case SDLK_RETURN: case SDLK_KP_ENTER: return VKEY_ENTER;
  case SDLK_ESCAPE: return VKEY_ESC;
  case SDLK_BACKSPACE: return VKEY_BACKSPACE;
  case SDLK_LEFT: return VKEY_LEFT;
  case SDLK_RIGHT: return VKEY_RIGHT;
  case SDLK_UP: return VKEY_UP;
  case SDLK_DOWN: return VKEY_DOWN;
  case SDLK_PAGEUP: return VKEY_PGUP;
  case SDLK_PAGEDOWN: return VKEY_PGDN;
  case SDLK_HOME: return VKEY_HOME;
  case SDLK_END: return VKEY_END;
  case SDLK_KP_PLUS: return '+';
  case SDLK_KP_MINUS: return '-';
  default:
    if ((k->mod & KMOD_SHIFT) && k->sym == SDLK_COMMA) return '<';
    if ((k->mod & KMOD_SHIFT) && k->sym == SDLK_PERIOD) return '>';
    if (k->sym == SDLK_SLASH || k->sym == SDLK_QUESTION) return k->sym;
    if ((k->mod & KMOD_SHIFT) && k->sym == SDLK_EQUALS) return '+';
    if (k->sym >= 32 && k->sym < 127) return (int)k->sym;
    return VKEY_NONE;
  }
}

/* Longest sleep when idle: a status message still times out on time. */
#define WINDOW_IDLE_MS 250
/* A live or playing source is looked at this often when nothing else
 * wakes the window, and drawn at most this often when only its data
 * changed (input draws at once): 30 frames a second. */
#define WINDOW_POLL_MS 20
#define WINDOW_FRAME_NS 33000000ull

/* Nothing changes until an event comes: the replay is paused, at its end
 * or stopped, or the live view is paused or closed, and no seek or
 * screenshot is pending. A grid looks for new pools, so it never is. */
static int window_idle(const vapp_t *a) {
  if (a->seek_to != UINT64_MAX || a->want_shot) return 0;
  if (a->kind == VSRC_REPLAY)
    return a->paused || a->failed || vreplay_at_end(a->rp);
  return a->paused || a->disconnected || a->failed;
}

/* Writes the frame to the first free gpubuddy-view-NNN.png; what
 * happened goes into msg for the status line. */
static void save_shot(int *count, const gpbt_fb_t *fb, char *msg, size_t n) {
  char path[64];
  for (int i = 0; i < 1000; i++) {
    snprintf(path, sizeof path, "gpubuddy-view-%03d.png", (*count)++);
    struct stat sb;
    if (stat(path, &sb) != 0) break;
  }
  if (gpbt_png_write(path, fb) == 0) snprintf(msg, n, "saved %s", path);
  else snprintf(msg, n, "could not save %s: %s", path, strerror(errno));
}

/* One window on one pool or a grid, and what its last frame showed. */
typedef struct vwin {
  SDL_Window *win;
  SDL_Renderer *ren;
  SDL_Texture *tex;
  gpbt_fb_t fb;
  vapp_t *app;        /* the pool shown, NULL for a grid or a compare */
  vgrid_t *grid;
  vcmp_t *cmp;        /* two runs compared */
  int scale;          /* --scale, 0: automatic */
  double sx, sy;      /* window points to output pixels */
  int quit, rc, shots;
  int input;          /* input or a resize since the last frame */
  uint64_t sig, last_draw_ns;
  uint64_t frames;
} vwin_t;

/* SDL falls back to its offscreen or dummy driver when there is no
 * display, and the window then runs where nobody sees it: refuse that
 * unless the user chose the driver (SDL_VIDEODRIVER). */
static int window_no_display(void) {
  const char *drv = getenv("SDL_VIDEODRIVER");
  if (drv && *drv) return 0;
  const char *cur = SDL_GetCurrentVideoDriver();
  return !cur || !strcmp(cur, "offscreen") || !strcmp(cur, "dummy") ||
         !strcmp(cur, "evdev");
}

static int window_open(vwin_t *v, int w, int h) {
  if (SDL_Init(SDL_INIT_VIDEO) != 0 || window_no_display()) {
    const char *why = SDL_WasInit(SDL_INIT_VIDEO) ? "" : SDL_GetError();
    fprintf(stderr, "gpubuddy-view: no display, try --headless "
                    "(--headless --png out.png)%s%s\n", *why ? ": " : "", why);
    SDL_Quit();
    return 1;
  }
  char title[200];
  snprintf(title, sizeof title, "gpubuddy-view: %s",
           v->grid ? v->grid->title : v->cmp ? v->cmp->title : v->app->title);
  v->win = SDL_CreateWindow(title, SDL_WINDOWPOS_UNDEFINED,
                            SDL_WINDOWPOS_UNDEFINED, w, h,
                            SDL_WINDOW_RESIZABLE | SDL_WINDOW_ALLOW_HIGHDPI);
  if (!v->win) {
    fprintf(stderr, "gpubuddy-view: SDL_CreateWindow: %s\n", SDL_GetError());
    SDL_Quit();
    return 1;
  }
  v->ren = SDL_CreateRenderer(v->win, -1, SDL_RENDERER_PRESENTVSYNC);
  if (!v->ren) v->ren = SDL_CreateRenderer(v->win, -1, SDL_RENDERER_SOFTWARE);
  if (!v->ren) {
    fprintf(stderr, "gpubuddy-view: SDL_CreateRenderer: %s\n", SDL_GetError());
    SDL_DestroyWindow(v->win);
    SDL_Quit();
    return 1;
  }
  return 0;
}

static void window_close(vwin_t *v) {
  if (v->tex) SDL_DestroyTexture(v->tex);
  gpbt_fb_free(&v->fb);
  SDL_DestroyRenderer(v->ren);
  SDL_DestroyWindow(v->win);
  SDL_Quit();
}

/* Follows the output size: the UI scale, and a new buffer, texture and
 * layout when it changed. 0, or -1 having said why. */
static int window_fit(vwin_t *v) {
  int ow, oh, ww, wh;
  if (SDL_GetRendererOutputSize(v->ren, &ow, &oh) != 0) {
    fprintf(stderr, "gpubuddy-view: SDL_GetRendererOutputSize: %s\n",
            SDL_GetError());
    return -1;
  }
  SDL_GetWindowSize(v->win, &ww, &wh);
  v->sx = ww ? (double)ow / ww : 1;
  v->sy = wh ? (double)oh / wh : 1;
  /* --scale N scales everything; by default the map keeps a cell per
   * point and the text doubles in a window big enough for it. */
  int dpr = v->sx >= 1.5 ? 2 : 1;
  int ui = v->scale ? v->scale : vframe_auto_scale(ow, oh, dpr);
  int cells = v->scale ? 0 : dpr;
  if (v->grid) v->grid->scale = ui, v->grid->cell_scale = cells;
  else if (v->cmp) v->cmp->scale = ui, v->cmp->cell_scale = cells;
  else v->app->scale = ui, v->app->cell_scale = cells;
  if (ow == v->fb.w && oh == v->fb.h && v->tex) return 0;
  if (v->tex) SDL_DestroyTexture(v->tex);
  v->tex = NULL;
  gpbt_fb_free(&v->fb);
  if (gpbt_fb_init(&v->fb, ow, oh)) return -1;
  v->tex = SDL_CreateTexture(v->ren, SDL_PIXELFORMAT_ARGB8888,
                             SDL_TEXTUREACCESS_STREAMING, ow, oh);
  if (!v->tex) {
    fprintf(stderr, "gpubuddy-view: SDL_CreateTexture: %s\n", SDL_GetError());
    return -1;
  }
  if (v->grid) vgrid_layout(v->grid, v->fb.w, v->fb.h);
  else if (v->app) vframe_layout(v->app, v->fb.w, v->fb.h);
  v->input = 1;
  return 0;
}

/* The mouse's window points in output pixels. */
static int window_px(double p, double s) { return (int)(p * s); }

/* Input to the grid, the compare or the one pool. */
static int win_key(vwin_t *v, int k) {
  return v->grid ? vgrid_key(v->grid, k)
         : v->cmp ? vcmp_key(v->cmp, k) : vinput_key(v->app, k);
}
static void win_text(vwin_t *v, const char *t) {
  if (v->grid) vgrid_text(v->grid, t);
  else if (v->cmp) vcmp_text(v->cmp, t);
  else vinput_text(v->app, t);
}
static void win_motion(vwin_t *v, int x, int y, int b) {
  if (v->grid) vgrid_motion(v->grid, x, y, b);
  else if (v->cmp) vcmp_motion(v->cmp, x, y, b);
  else vinput_motion(v->app, x, y, b);
}
static void win_button(vwin_t *v, int x, int y, int down) {
  if (v->grid) vgrid_button(v->grid, x, y, down);
  else if (v->cmp) vcmp_button(v->cmp, x, y, down);
  else vinput_button(v->app, x, y, down);
}
static void win_wheel(vwin_t *v, int x, int y, int dy) {
  if (v->grid) vgrid_wheel(v->grid, x, y, dy);
  else if (v->cmp) vcmp_wheel(v->cmp, x, y, dy);
  else vinput_wheel(v->app, x, y, dy);
}

/* The pool whose search prompt takes text: the focused one. */
static vapp_t *win_cur(const vwin_t *v) {
  return v->grid ? v->grid->focus : v->cmp ? &v->cmp->app[0] : v->app;
}

/* One SDL event to input.c, grid.c or compare.c. */
static void window_event(vwin_t *v, const SDL_Event *e) {
  vapp_t *cur = win_cur(v);
  double sx = v->sx, sy = v->sy;
  v->input = 1;
  switch (e->type) {
  case SDL_QUIT:
    v->quit = 1;
    break;
  case SDL_KEYDOWN: {
    int k = sdl_key(&e->key.keysym);
    /* Printable keys arrive as text while the search prompt is open. */
    if (cur && cur->searching && k >= 32 && k < 127) break;
    if (k && win_key(v, k)) v->quit = 1;
    break;
  }
  case SDL_TEXTINPUT:
    win_text(v, e->text.text);
    break;
  case SDL_MOUSEMOTION:
    win_motion(v, window_px(e->motion.x, sx), window_px(e->motion.y, sy),
               (int)e->motion.state);
    break;
  case SDL_MOUSEBUTTONDOWN:
  case SDL_MOUSEBUTTONUP:
    if (e->button.button != SDL_BUTTON_LEFT) break;
    win_button(v, window_px(e->button.x, sx), window_px(e->button.y, sy),
               e->type == SDL_MOUSEBUTTONDOWN);
    break;
  case SDL_MOUSEWHEEL: {
    int mx, my;
    SDL_GetMouseState(&mx, &my);
    if (e->wheel.y) win_wheel(v, window_px(mx, sx), window_px(my, sy), e->wheel.y);
    break;
  }
  case SDL_WINDOWEVENT:
    if (e->window.event == SDL_WINDOWEVENT_LEAVE) {
      if (v->grid) v->grid->mouse_in = 0;
      if (v->cmp) vcmp_motion(v->cmp, -1, -1, 0);
      else if (cur) cur->mouse_in = cur->tl_mouse = 0;
    }
    break;
  default:
    v->input = 0; /* nothing the frame shows */
    break;
  }
}

/* p: a screenshot of the grid, or of the pool it shows. */
static void window_shot(vwin_t *v) {
  vapp_t *cur = v->grid ? v->grid->focus : v->app;
  char msg[256];
  if (v->cmp && v->cmp->want_shot) {
    v->cmp->want_shot = 0;
    save_shot(&v->shots, &v->fb, msg, sizeof msg);
    for (int i = 0; i < 2; i++) vapp_message(&v->cmp->app[i], "%s", msg);
  } else if (cur && cur->want_shot) {
    cur->want_shot = 0;
    save_shot(&v->shots, &v->fb, msg, sizeof msg);
    vapp_message(cur, "%s", msg);
  } else if (v->grid && v->grid->want_shot) {
    v->grid->want_shot = 0;
    save_shot(&v->shots, &v->fb, msg, sizeof msg);
    vgrid_message(v->grid, "%s", msg);
  }
}

static int window_want_shot(const vwin_t *v) {
  vapp_t *cur = v->grid ? v->grid->focus : v->app;
  return (cur && cur->want_shot) || (v->grid && v->grid->want_shot) ||
         (v->cmp && v->cmp->want_shot);
}

/* Draws and presents a frame: 0, or -1 having said why. */
static int window_draw(vwin_t *v, uint64_t now) {
  if (v->grid) vgrid_draw(v->grid, &v->fb);
  else if (v->cmp) vcmp_draw(v->cmp, &v->fb);
  else vframe_draw(v->app, &v->fb);
  window_shot(v);
  if (SDL_UpdateTexture(v->tex, NULL, v->fb.px,
                        v->fb.w * (int)sizeof *v->fb.px) != 0 ||
      SDL_RenderCopy(v->ren, v->tex, NULL, NULL) != 0) {
    fprintf(stderr, "gpubuddy-view: drawing failed: %s\n", SDL_GetError());
    return -1;
  }
  SDL_RenderPresent(v->ren);
  v->frames++;
  v->last_draw_ns = now;
  v->input = 0;
  return 0;
}

/* How long to wait for input before looking at the source again. */
static int window_wait_ms(const vwin_t *v, int changed, uint64_t now) {
  if (v->input || window_want_shot(v)) return 0;
  if (changed) {
    uint64_t due = v->last_draw_ns + WINDOW_FRAME_NS;
    return due > now ? (int)((due - now) / 1000000u) + 1 : 0;
  }
  if (v->app && window_idle(v->app)) return WINDOW_IDLE_MS;
  if (v->cmp && window_idle(&v->cmp->app[0]) && window_idle(&v->cmp->app[1]))
    return WINDOW_IDLE_MS;
  return WINDOW_POLL_MS;
}

/* GPB_VIEW_TEST_STATE=PATH: at exit, what the input left behind, as one
 * JSON object, so tests/test_viewer_xvfb.sh can drive a real window with
 * input events and check their effect. */
static void window_state(const char *path, const vapp_t *a, const gpbt_fb_t *fb) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  gpbt_json_t j = {f, ",", 0};
  fputc('{', f);
  gpbt_json_put_int(&j, "width", fb->w);
  gpbt_json_put_int(&j, "height", fb->h);
  gpbt_json_put_bool(&j, "paused", a->paused);
  gpbt_json_put_bool(&j, "searching", a->searching);
  gpbt_json_put_str(&j, "search", a->search);
  gpbt_json_put_bool(&j, "have_sel", a->have_sel);
  gpbt_json_put_u64(&j, "sel_off", a->sel_off);
  gpbt_json_put_str(&j, "message", a->msg);
  gpbt_json_put_int(&j, "map_cols", a->map.cols);
  gpbt_json_put_int(&j, "map_rows", a->map.rows);
  gpbt_json_put_u64(&j, "map_start", a->map.start);
  gpbt_json_put_u64(&j, "map_end", a->map.end);
  gpbt_json_put_int(&j, "color", (int)a->map.color);
  gpbt_json_put_bool(&j, "bands", a->show_bands);
  gpbt_json_put_int(&j, "hover_skip", a->hover_skip);
  gpbt_json_put_int(&j, "tl_x", a->tl_x);
  gpbt_json_put_int(&j, "tl_y", a->tl_y);
  gpbt_json_put_int(&j, "tl_w", a->tl_w);
  gpbt_json_put_int(&j, "tl_h", a->tl_h);
  gpbt_json_put_u64(&j, "tl_zlo", a->tl_zlo);
  gpbt_json_put_u64(&j, "tl_zhi", a->tl_zhi);
  fputc(',', f);
  vapp_json_members(a, f);
  fputs("}\n", f);
  fclose(f);
}

/* Brings the source forward by dt and says what the frame would show. */
static uint64_t window_update(vwin_t *v, double dt, uint64_t now,
                              const char **find) {
  if (v->grid) {
    vgrid_update(v->grid, dt);
    return vgrid_signature(v->grid, now);
  }
  if (v->cmp) {
    vcmp_update(v->cmp, dt);
    return vcmp_signature(v->cmp, now);
  }
  vapp_update(v->app, dt);
  if (*find) vinput_find(v->app, *find), v->input = 1;
  *find = NULL;
  return vapp_signature(v->app, now);
}

static int window_loop(vwin_t *v, int w, int h, const char *find) {
  if (window_open(v, w, h)) return 1;
  uint64_t last = gpb_now_ns(), t0 = last, quit_ns = 0;
  const char *qe = getenv("GPB_VIEW_TEST_QUIT_MS");
  if (qe && *qe) quit_ns = strtoull(qe, NULL, 10) * 1000000ull;
  int changed = 1, wait_ms = 0;
  SDL_StartTextInput();
  while (!v->quit && !v->rc) {
    if (quit_ns && gpb_now_ns() - t0 >= quit_ns) break;
    /* Sleep until input, or until the source is due a look: a frame
     * costs a whole upload and present, so one is drawn only on input or
     * when what it shows changed (60 a second took 85% of a core). The
     * event stays queued for the loop below. */
    if (wait_ms > 0) SDL_WaitEventTimeout(NULL, wait_ms);
    if (window_fit(v)) {
      v->rc = 1;
      break;
    }
    SDL_Event e;
    while (SDL_PollEvent(&e)) window_event(v, &e);
    uint64_t now = gpb_now_ns();
    double dt = (double)(now - last) / 1e9;
    last = now;
    if (dt > 0.25) dt = 0.25;
    uint64_t sig = window_update(v, dt, now, &find);
    if (sig != v->sig || !v->frames) changed = 1;
    v->sig = sig;
    int due = now - v->last_draw_ns >= WINDOW_FRAME_NS;
    if (v->input || window_want_shot(v) || (changed && due)) {
      if (window_draw(v, now)) v->rc = 1;
      changed = 0;
    }
    wait_ms = window_wait_ms(v, changed, gpb_now_ns());
  }
  if (quit_ns)
    fprintf(stderr, "gpubuddy-view: %" PRIu64 " frames in %" PRIu64 " ms\n",
            v->frames, (uint64_t)((gpb_now_ns() - t0) / 1000000u));
  const char *sp = getenv("GPB_VIEW_TEST_STATE");
  if (sp && *sp && v->app) window_state(sp, v->app, &v->fb);
  SDL_StopTextInput();
  window_close(v);
  return v->rc;
}

int vwindow_run(vapp_t *app, vgrid_t *grid, int w, int h, int scale,
                const char *find) {
  vwin_t v = {0};
  v.app = grid ? NULL : app;
  v.grid = grid;
  v.scale = scale;
  v.sx = v.sy = 1;
  return window_loop(&v, w, h, find);
}

int vwindow_run_cmp(vcmp_t *cmp, int w, int h, int scale) {
  vwin_t v = {0};
  v.cmp = cmp;
  v.scale = scale;
  v.sx = v.sy = 1;
  return window_loop(&v, w, h, NULL);
}

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
    if (k->sym == SDLK_SLASH || k->sym == SDLK_QUESTION) return k->sym;
    if ((k->mod & KMOD_SHIFT) && k->sym == SDLK_EQUALS) return '+';
    if (k->sym >= 32 && k->sym < 127) return (int)k->sym;
    return VKEY_NONE;
  }
}

/* Longest sleep when idle: a status message still times out on time. */
#define WINDOW_IDLE_MS 250

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
  fputc(',', f);
  vapp_json_members(a, f);
  fputs("}\n", f);
  fclose(f);
}

int vwindow_run(vapp_t *app, vgrid_t *grid, int w, int h, int scale,
                const char *find) {
  if (SDL_Init(SDL_INIT_VIDEO) != 0) {
    fprintf(stderr, "gpubuddy-view: cannot open a display: %s\n"
                    "  (no display? try --headless --png out.png)\n",
            SDL_GetError());
    return 1;
  }
  char title[200];
  snprintf(title, sizeof title, "gpubuddy-view: %s",
           grid ? grid->title : app->title);
  SDL_Window *win = SDL_CreateWindow(title, SDL_WINDOWPOS_UNDEFINED,
                                     SDL_WINDOWPOS_UNDEFINED, w, h,
                                     SDL_WINDOW_RESIZABLE | SDL_WINDOW_ALLOW_HIGHDPI);
  if (!win) {
    fprintf(stderr, "gpubuddy-view: SDL_CreateWindow: %s\n", SDL_GetError());
    SDL_Quit();
    return 1;
  }
  SDL_Renderer *ren = SDL_CreateRenderer(win, -1, SDL_RENDERER_PRESENTVSYNC);
  if (!ren) ren = SDL_CreateRenderer(win, -1, SDL_RENDERER_SOFTWARE);
  if (!ren) {
    fprintf(stderr, "gpubuddy-view: SDL_CreateRenderer: %s\n", SDL_GetError());
    SDL_DestroyWindow(win);
    SDL_Quit();
    return 1;
  }
  SDL_Texture *tex = NULL;
  gpbt_fb_t fb = {0};
  int quit = 0, rc = 0, found = 0, shots = 0;
  uint64_t last = gpb_now_ns(), t0 = last, frames = 0, quit_ns = 0;
  const char *qe = getenv("GPB_VIEW_TEST_QUIT_MS");
  if (qe && *qe) quit_ns = strtoull(qe, NULL, 10) * 1000000ull;
  double sx = 1, sy = 1; /* window points to output pixels */
  SDL_StartTextInput();
  while (!quit) {
    if (quit_ns && gpb_now_ns() - t0 >= quit_ns) break;
    /* Idle: sleep until an event (it stays queued for the loop below).
     * Redrawing 60 times a second took 36-50% of a core. */
    if (frames && !grid && window_idle(app))
      SDL_WaitEventTimeout(NULL, WINDOW_IDLE_MS);
    int ow, oh, ww, wh;
    if (SDL_GetRendererOutputSize(ren, &ow, &oh) != 0) {
      fprintf(stderr, "gpubuddy-view: SDL_GetRendererOutputSize: %s\n", SDL_GetError());
      rc = 1;
      break;
    }
    SDL_GetWindowSize(win, &ww, &wh);
    sx = ww ? (double)ow / ww : 1;
    sy = wh ? (double)oh / wh : 1;
    /* --scale N scales everything; by default the map keeps a cell per
     * point and the text doubles in a window big enough for it. */
    int dpr = sx >= 1.5 ? 2 : 1;
    int ui = scale ? scale : vframe_auto_scale(ow, oh, dpr);
    int cells = scale ? 0 : dpr;
    if (grid) grid->scale = ui, grid->cell_scale = cells;
    else app->scale = ui, app->cell_scale = cells;
    if (ow != fb.w || oh != fb.h || !tex) {
      if (tex) SDL_DestroyTexture(tex);
      gpbt_fb_free(&fb);
      if (gpbt_fb_init(&fb, ow, oh)) {
        rc = 1;
        break;
      }
      tex = SDL_CreateTexture(ren, SDL_PIXELFORMAT_ARGB8888,
                              SDL_TEXTUREACCESS_STREAMING, ow, oh);
      if (!tex) {
        fprintf(stderr, "gpubuddy-view: SDL_CreateTexture: %s\n", SDL_GetError());
        rc = 1;
        break;
      }
      if (grid) vgrid_layout(grid, fb.w, fb.h);
      else vframe_layout(app, fb.w, fb.h);
    }
    SDL_Event e;
    while (SDL_PollEvent(&e)) {
      /* In a grid, the focused pool is the app, until G leaves it. */
      vapp_t *cur = grid ? grid->focus : app;
      switch (e.type) {
      case SDL_QUIT:
        quit = 1;
        break;
      case SDL_KEYDOWN: {
        int k = sdl_key(&e.key.keysym);
        /* Printable keys arrive as text while the search prompt is open. */
        if (cur && cur->searching && k >= 32 && k < 127) break;
        if (k && (grid ? vgrid_key(grid, k) : vinput_key(app, k))) quit = 1;
        break;
      }
      case SDL_TEXTINPUT:
        if (grid) vgrid_text(grid, e.text.text);
        else vinput_text(app, e.text.text);
        break;
      case SDL_MOUSEMOTION:
        if (grid)
          vgrid_motion(grid, (int)(e.motion.x * sx), (int)(e.motion.y * sy),
                       (int)e.motion.state);
        else
          vinput_motion(app, (int)(e.motion.x * sx), (int)(e.motion.y * sy),
                        (int)e.motion.state);
        break;
      case SDL_MOUSEBUTTONDOWN:
      case SDL_MOUSEBUTTONUP:
        if (e.button.button != SDL_BUTTON_LEFT) break;
        if (grid)
          vgrid_button(grid, (int)(e.button.x * sx), (int)(e.button.y * sy),
                       e.type == SDL_MOUSEBUTTONDOWN);
        else
          vinput_button(app, (int)(e.button.x * sx), (int)(e.button.y * sy),
                        e.type == SDL_MOUSEBUTTONDOWN);
        break;
      case SDL_MOUSEWHEEL: {
        int mx, my;
        SDL_GetMouseState(&mx, &my);
        if (e.wheel.y && grid)
          vgrid_wheel(grid, (int)(mx * sx), (int)(my * sy), e.wheel.y);
        else if (e.wheel.y)
          vinput_wheel(app, (int)(mx * sx), (int)(my * sy), e.wheel.y);
        break;
      }
      case SDL_WINDOWEVENT:
        if (e.window.event == SDL_WINDOWEVENT_LEAVE) {
          if (grid) grid->mouse_in = 0;
          if (cur) cur->mouse_in = 0;
        }
        break;
      default:
        break;
      }
    }
    uint64_t now = gpb_now_ns();
    double dt = (double)(now - last) / 1e9;
    last = now;
    if (dt > 0.25) dt = 0.25;
    if (grid) {
      vgrid_update(grid, dt);
      vgrid_draw(grid, &fb);
    } else {
      vapp_update(app, dt);
      if (!found && find) vinput_find(app, find);
      found = 1;
      vframe_draw(app, &fb);
    }
    /* p: in the grid, or in the pool it shows. */
    vapp_t *cur = grid ? grid->focus : app;
    if (cur && cur->want_shot) {
      char msg[256];
      cur->want_shot = 0;
      save_shot(&shots, &fb, msg, sizeof msg);
      vapp_message(cur, "%s", msg);
    } else if (grid && grid->want_shot) {
      char msg[256];
      grid->want_shot = 0;
      save_shot(&shots, &fb, msg, sizeof msg);
      vgrid_message(grid, "%s", msg);
    }
    if (SDL_UpdateTexture(tex, NULL, fb.px, fb.w * (int)sizeof *fb.px) != 0 ||
        SDL_RenderCopy(ren, tex, NULL, NULL) != 0) {
      fprintf(stderr, "gpubuddy-view: drawing failed: %s\n", SDL_GetError());
      rc = 1;
      break;
    }
    SDL_RenderPresent(ren);
    frames++;
  }
  if (quit_ns)
    fprintf(stderr, "gpubuddy-view: %" PRIu64 " frames in %" PRIu64 " ms\n",
            frames, (uint64_t)((gpb_now_ns() - t0) / 1000000u));
  const char *sp = getenv("GPB_VIEW_TEST_STATE");
  if (sp && *sp && !grid) window_state(sp, app, &fb);
  SDL_StopTextInput();
  if (tex) SDL_DestroyTexture(tex);
  gpbt_fb_free(&fb);
  SDL_DestroyRenderer(ren);
  SDL_DestroyWindow(win);
  SDL_Quit();
  return rc;
}

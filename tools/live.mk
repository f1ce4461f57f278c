# tools/live.mk: build rules (included from Makefile.am).

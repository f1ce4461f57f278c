# tools/trace.mk: build rules (included from Makefile.am).

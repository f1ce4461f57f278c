# lib/gpu.mk: build rules (included from Makefile.am).

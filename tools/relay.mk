# tools/relay.mk: build rules (included from Makefile.am).

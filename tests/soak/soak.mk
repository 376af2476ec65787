# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# The long soak (tests/soak/soak.py), not part of make test:
#   make soak                 30 minutes (SOAK_SECONDS=1800), as root
#   make soak SOAK_SECONDS=N  N seconds (tests/integration/test_soak.py
#                             runs 180 with make test)
# Included by the top-level Makefile, which provides OUT, PYTHON and
# TEST_PROGS. Nothing here may set the default goal.

UMT_SOAK_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
UMT_SOAK_SAVED_GOAL := $(.DEFAULT_GOAL)

SOAK_SECONDS ?= 1800

.PHONY: soak

soak: $(OUT)/umtrace $(TEST_PROGS)
	$(Q)SOAK_SECONDS=$(SOAK_SECONDS) $(PYTHON) $(UMT_SOAK_DIR)/soak.py --out $(OUT)

.DEFAULT_GOAL := $(UMT_SOAK_SAVED_GOAL)

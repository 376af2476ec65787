# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Installing and packaging umtrace (README, Installing):
#   make man                      the man pages, in $(OUT)/man/man8
#   make install [PREFIX=/usr/local] [DESTDIR=...]
#   make uninstall [PREFIX=...] [DESTDIR=...]
#   make deb                      build/deb/umtrace_VERSION_{amd64,arm64}.deb
#   make image-context            build/image/{amd64,arm64}/umtrace, for
#                                 scripts/container/Containerfile
#
# Included by the top-level Makefile, which provides OUT, ARCH, STATIC,
# VERSION, Q and msg. `make install` installs what `make` built: the
# dynamic binary, or with STATIC=1 (and for ARCH=arm64) the static one.

PREFIX ?= /usr/local
SBINDIR ?= $(PREFIX)/sbin
MANDIR ?= $(PREFIX)/share/man
LIBEXECDIR ?= $(PREFIX)/libexec
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
# systemd reads units from /usr/local/lib/systemd/system as well as /usr/lib.
UNITDIR ?= $(PREFIX)/lib/systemd/system
# The unit and the man pages name /etc/umtrace/guard.conf, whatever PREFIX.
SYSCONFDIR ?= /etc
INSTALL ?= install

MAN_SRCS := $(wildcard scripts/man/*.8)
MAN_PAGES := $(patsubst scripts/man/%,$(OUT)/man/man8/%,$(MAN_SRCS))
ifeq ($(STATIC),1)
INSTALL_BIN := $(OUT)/umtrace-static
else
INSTALL_BIN := $(OUT)/umtrace
endif
GUARD_CONF := $(DESTDIR)$(SYSCONFDIR)/umtrace/guard.conf

.PHONY: man install uninstall deb deb-arch image-context

man: $(MAN_PAGES)

# The attach options are written once (attach-options.man) and pulled into
# each page that has them.
$(OUT)/man/man8/%.8: scripts/man/%.8 $(wildcard scripts/man/*.man) Makefile
	$(call msg,MAN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)soelim -r -I scripts/man $< | sed 's/@VERSION@/$(VERSION)/g' > $@

install: $(INSTALL_BIN) man
	$(call msg,INSTALL,$(DESTDIR)$(PREFIX))
	$(Q)$(INSTALL) -D -m 0755 $(INSTALL_BIN) $(DESTDIR)$(SBINDIR)/umtrace
	$(Q)$(INSTALL) -d $(DESTDIR)$(MANDIR)/man8
	$(Q)$(INSTALL) -m 0644 $(MAN_PAGES) $(DESTDIR)$(MANDIR)/man8
	$(Q)$(INSTALL) -D -m 0644 scripts/completion/umtrace $(DESTDIR)$(BASHCOMPDIR)/umtrace
	$(Q)$(INSTALL) -D -m 0755 scripts/slurm/slurm-suspend \
		$(DESTDIR)$(LIBEXECDIR)/umtrace/slurm-suspend
	$(Q)$(INSTALL) -d $(DESTDIR)$(UNITDIR)
	$(Q)sed -e 's|^ExecStart=/usr/local/sbin/umtrace |ExecStart=$(SBINDIR)/umtrace |' \
		-e 's|^\(ExecStart=.*\)/etc/umtrace/guard.conf|\1$(SYSCONFDIR)/umtrace/guard.conf|' \
		scripts/umtrace-guard.service > $(DESTDIR)$(UNITDIR)/umtrace-guard.service
	$(Q)chmod 0644 $(DESTDIR)$(UNITDIR)/umtrace-guard.service
	$(Q)if [ -e $(GUARD_CONF) ]; then \
		echo "  kept     $(GUARD_CONF) (scripts/guard.conf.example has every key)"; \
	else \
		$(INSTALL) -D -m 0644 scripts/guard.conf.example $(GUARD_CONF); \
	fi
	$(Q)[ -n "$(DESTDIR)" ] || echo "  then: systemctl daemon-reload; systemctl enable --now umtrace-guard"

# The configuration goes only if it is still the example: an edited one is
# the operator's, and stays.
uninstall:
	$(call msg,UNINSTALL,$(DESTDIR)$(PREFIX))
	$(Q)rm -f $(DESTDIR)$(SBINDIR)/umtrace $(DESTDIR)$(BASHCOMPDIR)/umtrace \
		$(DESTDIR)$(LIBEXECDIR)/umtrace/slurm-suspend \
		$(DESTDIR)$(UNITDIR)/umtrace-guard.service \
		$(addprefix $(DESTDIR)$(MANDIR)/man8/,$(notdir $(MAN_SRCS)))
	$(Q)rmdir $(DESTDIR)$(LIBEXECDIR)/umtrace 2>/dev/null || true
	$(Q)if cmp -s $(GUARD_CONF) scripts/guard.conf.example; then \
		rm -f $(GUARD_CONF); rmdir $(dir $(GUARD_CONF)) 2>/dev/null || true; \
	elif [ -e $(GUARD_CONF) ]; then \
		echo "  kept     $(GUARD_CONF): it is not the example (your settings)"; \
	fi

# One package per architecture, each from its static build (build/x86,
# build/arm64), with debhelper (scripts/debian): the package's source tree
# is build/deb/ARCH/umtrace-VERSION, its payload staged by `make install`.
DEB_ARCHES := amd64:x86 arm64:arm64
DEB_VERSION = $(shell dpkg-parsechangelog -l scripts/debian/changelog -S Version)
DEB_TREE = build/deb/$(DEB_ARCH)/umtrace-$(VERSION)

deb:
	$(Q)$(foreach p,$(DEB_ARCHES),$(MAKE) --no-print-directory SANITIZE= STATIC=1 \
		ARCH=$(lastword $(subst :, ,$(p))) OUT=build/$(lastword $(subst :, ,$(p))) \
		DEB_ARCH=$(firstword $(subst :, ,$(p))) deb-arch &&) true

deb-arch: $(INSTALL_BIN) man
	$(Q)case "$(DEB_VERSION)" in $(VERSION)-*) ;; *) \
		echo "scripts/debian/changelog is at $(DEB_VERSION), not $(VERSION)-N" >&2; \
		exit 1;; esac
	$(call msg,DEB,build/deb/umtrace_$(DEB_VERSION)_$(DEB_ARCH).deb)
	$(Q)rm -rf build/deb/$(DEB_ARCH) build/deb/umtrace_$(DEB_VERSION)_$(DEB_ARCH).*
	$(Q)mkdir -p $(DEB_TREE)
	$(Q)cp -R scripts/debian $(DEB_TREE)/debian
	$(Q)$(MAKE) --no-print-directory Q=@ msg= install DESTDIR=$(abspath $(DEB_TREE))/stage \
		PREFIX=/usr UNITDIR=/lib/systemd/system SYSCONFDIR=/etc >/dev/null
	$(Q)cd $(DEB_TREE) && DEB_BUILD_OPTIONS="nocheck $(DEB_BUILD_OPTIONS)" \
		dpkg-buildpackage -b -us -uc --host-arch=$(DEB_ARCH) \
		>../build.log 2>&1 || { tail -n 40 ../build.log >&2; exit 1; }
	$(Q)cp build/deb/$(DEB_ARCH)/umtrace_$(DEB_VERSION)_$(DEB_ARCH).deb build/deb/

# The container image's build context: each architecture's static binary,
# without its DWARF, under the name buildx gives the platform (TARGETARCH).
image-context:
	$(Q)$(foreach p,$(DEB_ARCHES),$(MAKE) --no-print-directory -s SANITIZE= STATIC=1 \
		ARCH=$(lastword $(subst :, ,$(p))) OUT=build/$(lastword $(subst :, ,$(p))) static && \
		mkdir -p build/image/$(firstword $(subst :, ,$(p))) && \
		$(if $(filter arm64:%,$(p)),aarch64-linux-gnu-)strip --strip-debug \
			build/$(lastword $(subst :, ,$(p)))/umtrace-static \
			-o build/image/$(firstword $(subst :, ,$(p)))/umtrace &&) true
	$(call msg,IMAGE,build/image: make it with scripts/container/Containerfile)

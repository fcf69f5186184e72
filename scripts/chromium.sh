#!/usr/bin/env bash
# Headless Chromium and its driver, from Debian, for the dashboard's browser tests
# (tests/ui). Installed when missing and this user may; sourced by scripts/test.sh.
if ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing Debian's chromium and chromium-driver for the browser tests"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 || true
  fi
fi

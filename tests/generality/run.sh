#!/usr/bin/env bash
# Runs the generality corpus (for ctest, label generality).
#   tests/generality/run.sh [KINTSUGI_BINARY] [extra pytest arguments...]   (tests/run_pytest_suite.sh)
exec bash "$(dirname "${BASH_SOURCE[0]}")/../run_pytest_suite.sh" "$(dirname "${BASH_SOURCE[0]}")" "$@"

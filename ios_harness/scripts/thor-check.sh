#!/usr/bin/env bash
# Xcode build phase: fail the build when a model's on-device training is over its energy or time budget.
#
# Add a "Run Script" build phase to the app target (before "Compile Sources"):
#     "${SRCROOT}/../ios_harness/scripts/thor-check.sh"
# It runs `thor-sdk check --budgets FILE` (docs/check.md) and fails the build on any non-zero exit:
# 1 when a model is over budget, 2 for a malformed estimator, budgets file or model. Over-budget lines and
# errors are also printed as `error: ...`, which Xcode lists in the Issue navigator.
#
# Environment (all optional):
#   THOR_BUDGETS     budgets TOML file            (default: ${SRCROOT}/thor-budgets.toml)
#   THOR_ESTIMATORS  estimator JSON path(s), ':'-separated; replace the budgets file's estimators
#   THOR_JUNIT       also write a JUnit XML report there
#   THOR_SDK         the command that runs thor-sdk (default: thor-sdk; e.g. "python3 -m thor_sdk.cli.main")
set -euo pipefail

budgets="${THOR_BUDGETS:-${SRCROOT:-.}/thor-budgets.toml}"
read -r -a thor_sdk <<< "${THOR_SDK:-thor-sdk}"
args=(check --budgets "$budgets")
if [[ -n "${THOR_ESTIMATORS:-}" ]]; then
  IFS=':' read -r -a estimators <<< "$THOR_ESTIMATORS"
  for estimator in "${estimators[@]}"; do
    args+=(--estimator "$estimator")
  done
fi
if [[ -n "${THOR_JUNIT:-}" ]]; then
  args+=(--junit "$THOR_JUNIT")
fi

rc=0
output="$("${thor_sdk[@]}" "${args[@]}" 2>&1)" || rc=$?
while IFS= read -r line; do
  case "$line" in
    FAIL*) echo "error: thor-sdk check: ${line#FAIL  }" ;;
    Error:*) echo "error: thor-sdk check: ${line#Error: }" ;;
    *) echo "$line" ;;
  esac
done <<< "$output"
if [[ "$rc" -ne 0 ]]; then
  echo "error: thor-sdk check exited $rc ($([[ "$rc" -eq 1 ]] && echo "over budget" || echo "input error")): $budgets" >&2
fi
exit "$rc"
